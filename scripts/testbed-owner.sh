# Sourced by scripts/lxd-cluster and scripts/lxd-systemd: a test bed's LXD
# names (rc-member*, rcbr0, rs-systemd*) are fixed, so two checkouts on one
# host would share, and break, one bed. The bed belongs to one checkout at
# a time: `up` records the checkout's root in $TESTBED_OWNER (under
# /var/lib/remote-test-beds, kept across reboots as the containers are);
# another checkout's `up` or `down` is refused with a message naming the
# owner, until the owner's `down` frees it (.ci/run always ends with one)
# or the owning checkout is deleted. An flock serialises the scripts
# themselves. Needs $root, $TESTBED (the bed's name), say and die.

TESTBED_DIR=${REMOTE_TESTBED_DIR:-/var/lib/remote-test-beds}
TESTBED_OWNER="$TESTBED_DIR/$TESTBED.owner"

# claim_bed takes the bed for this checkout, or dies naming its owner.
claim_bed() {
  mkdir -p "$TESTBED_DIR"
  exec 9>"$TESTBED_DIR/$TESTBED.lock"
  flock -w 900 9 || die "another $TESTBED up/down has held $TESTBED_DIR/$TESTBED.lock for 15 minutes"
  local owner=""
  [ ! -s "$TESTBED_OWNER" ] || owner=$(cat "$TESTBED_OWNER")
  if [ -n "$owner" ] && [ "$owner" != "$root" ]; then
    if [ -d "$owner/scripts" ]; then
      die "the $TESTBED test bed on this host belongs to the checkout $owner; two checkouts cannot share it (its LXD names are fixed). Run $owner/scripts/$TESTBED down first (or remove $TESTBED_OWNER if that checkout no longer uses it)"
    fi
    say "taking over the test bed of $owner (that checkout is gone)"
  fi
  printf '%s\n' "$root" >"$TESTBED_OWNER.tmp"
  mv "$TESTBED_OWNER.tmp" "$TESTBED_OWNER"
}

# release_bed frees the bed after a down.
release_bed() { rm -f "$TESTBED_OWNER"; }
