//go:build systemd

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
)

// The operator's path (docs/releasing.md): the Debian package of make
// release installed with apt in the real-systemd bed, upgraded with apt
// while a run streams, removed and purged.

// sdPackages returns the package make release builds (REMOTE_RELEASE_DEB
// when scripts/test already built it) and the same package as a newer
// version (Version: +upgrade1), for the upgrade.
func sdPackages(t *testing.T) (deb, newer string) {
	t.Helper()
	for _, c := range []string{"dpkg-deb", "dpkg-shlibdeps", "make"} {
		if _, err := exec.LookPath(c); err != nil {
			testkit.Missing(t, "%s (make release)", c)
		}
	}
	dir := t.TempDir()
	deb = os.Getenv("REMOTE_RELEASE_DEB")
	if deb == "" {
		cmd := exec.Command("make", "--no-print-directory", "release", "RELEASE_DIR="+dir)
		cmd.Dir = testkit.Root()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make release: %v\n%s", err, out)
		}
		debs, _ := filepath.Glob(filepath.Join(dir, "remote_*_amd64.deb"))
		if len(debs) != 1 {
			t.Fatalf("make release left %q", debs)
		}
		deb = debs[0]
	}
	tree := filepath.Join(dir, "newer")
	newer = filepath.Join(dir, "remote-newer.deb")
	script := `set -e
dpkg-deb -R "$1" "$2"
sed -i 's/^Version: .*/&+upgrade1/' "$2/DEBIAN/control"
dpkg-deb --root-owner-group -Zxz -b "$2" "$3" >/dev/null`
	if out, err := exec.Command("sh", "-c", script, "sh", deb, tree, newer).CombinedOutput(); err != nil {
		t.Fatalf("repack as a newer version: %v\n%s", err, out)
	}
	return deb, newer
}

// aptInstall pushes a package into the container and installs it with apt.
func (b *sdBed) aptInstall(deb string) string {
	b.t.Helper()
	b.must0(sdHostLXC(nil, "file", "push", deb, b.name+"/root/"+filepath.Base(deb)))
	return b.must("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q",
		"--no-install-recommends", "/root/"+filepath.Base(deb))
}

// TestSystemdPackage installs the package with apt on a bare systemd host:
// the service is enabled and running with the group, the directories and a
// secrets key made by postinst, remotectl answers; an edited configuration
// survives an upgrade installed while a run streams, the upgrade restarts
// the daemon and the run completes exactly once; remove stops the service
// and keeps /etc/remote and /var/lib/remote, purge deletes them.
func TestSystemdPackage(t *testing.T) {
	t.Parallel() // its own container
	const parts = 30
	reply := surviveReply(parts, 300*time.Millisecond)
	deb, newer := sdPackages(t)
	claude := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t, reply)
	b := newSystemdBed(t)

	// Install: no make install, no manual steps.
	b.aptInstall(deb)
	for unit, want := range map[string]string{"remoted.service": "active", "remoted.socket": "active"} {
		if got := b.show(unit, "ActiveState"); got != want {
			t.Errorf("%s is %s after apt install, want %s:\n%s", unit, got, want, b.journal())
		}
		if got := b.show(unit, "UnitFileState"); got != "enabled" {
			t.Errorf("%s is %s after apt install, want enabled", unit, got)
		}
	}
	if got := b.must("stat", "-c", "%a %U", "/etc/remote/secrets.key", "/etc/remote/remoted.toml", "/var/lib/remote"); got != "600 root\n640 root\n700 root" {
		t.Errorf("modes and owners after install:\n%s", got)
	}
	b.must("getent", "group", "remote")
	if got := b.must("remotectl", "info"); !strings.Contains(got, "version") {
		t.Errorf("remotectl info:\n%s", got)
	}
	// No LXD and no provider in the bed: doctor exits 1 for those, but the
	// key postinst made is found and fine.
	out, _ := b.sh("remotectl doctor --json 2>/dev/null")
	var rep api.DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("remotectl doctor --json: %v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "secrets_key" {
			found = c.Level == api.DoctorOK
		}
	}
	if !found {
		t.Errorf("remotectl doctor does not find the secrets key postinst made fine:\n%s", out)
	}

	// The operator configures it (the conffile, edited) and restarts.
	b.must0(sdHostLXC(nil, "config", "device", "add", b.name, "model", "proxy",
		"listen=tcp:127.0.0.1:"+sdModelPort, "connect=tcp:"+strings.TrimPrefix(fake.URL, "http://"), "bind=container"))
	b.must0(sdHostLXC(nil, "file", "push", "--create-dirs", "--mode", "0755", claude, b.name+"/opt/claude/claude"))
	b.must("mkdir", "-p", "/root/work", "/root/agent-home")
	b.write("/etc/remote/remoted.toml", "0640", sdRunConfig)
	b.must("systemctl", "restart", "remoted.service")

	// Upgrade while a run streams.
	chat := b.createChat()
	runID := b.prompt(chat.ID, "count slowly")
	evs := b.waitEvents(chat.ID, 90*time.Second, func(evs []api.Event) bool {
		return count(evs, api.EventAssistantText) >= 3 || ended(evs)
	})
	if ended(evs) {
		t.Fatalf("the run ended before the upgrade: %s", summarize(evs))
	}
	b.checkRunUnit(runID)
	pid := b.show("remoted.service", "MainPID")
	b.aptInstall(newer)
	if got := b.must("dpkg-query", "-W", "-f", "${Version}", "remote"); !strings.HasSuffix(got, "+upgrade1") {
		t.Errorf("installed version %q after the upgrade, want the newer one", got)
	}
	if got := b.show("remoted.service", "MainPID"); got == pid || b.show("remoted.service", "ActiveState") != "active" {
		t.Errorf("remoted.service MainPID %s (was %s), %s after the upgrade: want restarted and active",
			got, pid, b.show("remoted.service", "ActiveState"))
	}
	if got := b.must("cat", "/etc/remote/remoted.toml"); got != strings.TrimSpace(sdRunConfig) {
		t.Errorf("the upgrade replaced the edited /etc/remote/remoted.toml:\n%s", got)
	}
	evs = b.waitEvents(chat.ID, 90*time.Second, ended)
	checkTurn(t, evs, 0, surviveText(parts))
	b.waitRunsEmpty()

	// Remove keeps the operator's data; purge deletes it.
	b.must("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "remove", "-y", "-q", "remote")
	if got := b.show("remoted.service", "ActiveState"); got != "inactive" {
		t.Errorf("remoted.service is %s after apt remove", got)
	}
	if out, _ := b.sh("ls /usr/bin/remoted /lib/systemd/system/remoted.service 2>/dev/null"); out != "" {
		t.Errorf("apt remove left %s", out)
	}
	b.must("test", "-f", "/etc/remote/secrets.key")
	b.must("test", "-f", "/etc/remote/remoted.toml")
	b.must("test", "-d", "/var/lib/remote")
	b.must("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "-q", "remote")
	if out, _ := b.sh("ls -d /etc/remote /var/lib/remote 2>/dev/null"); out != "" {
		t.Errorf("apt purge left %s", out)
	}
}
