//go:build systemd

package main

import (
	"encoding/json"
	"fmt"
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
// release installed with apt in the real-systemd bed, a project chat on the
// host's LXD, upgraded with apt while runs stream, removed and purged.

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

// The project chat of the package test runs in a container on this
// machine's LXD, which the packaged remoted in the bed reaches through a
// proxy device: the host's LXD socket at /var/lib/lxd/unix.socket in the
// bed, where lxdexec's discovery finds it (the packaged configuration
// names no [lxd] socket). THAT SOCKET IS ROOT ON THE HOST: whoever can
// reach it in the bed owns the machine. A test bed only, deleted with the
// test; the product never hands LXD's socket into a container.
const sdHostLXDSocket = "/var/lib/lxd/unix.socket"

// sdProjectConfig is sdRunConfig for a daemon that also runs project chats
// on the host's LXD: the busybox test image with the profile that gives its
// containers the fake model at 127.0.0.1:sdModelPort, and the files a
// project container needs for Claude Code (the CLI the bed has at
// /opt/claude, the bed's bash and C library: survive_project_test.go's
// projectGlibc). remote-shim is the package's, next to remoted.
func sdProjectConfig(profile string) string {
	var c strings.Builder
	c.WriteString(sdRunConfig)
	// (Still [providers.claude]: a container's PATH has no /opt/claude.)
	c.WriteString("check = [\"/opt/claude/claude\", \"--version\"]\n")
	fmt.Fprintf(&c, "\n[lxd]\nimage = %q\nprofiles = [\"default\", %q]\n", testkit.TestImage, profile)
	// Each at the same path in the container ([providers.claude] binary
	// names the CLI there too).
	for _, f := range append([]string{"/opt/claude/claude"}, projectGlibc...) {
		fmt.Fprintf(&c, "\n[[providers.claude.install_files]]\nhost = %q\ncontainer = %q\nmode = \"0755\"\n", f, f)
	}
	return c.String()
}

// projectLXD gives the bed the host's LXD (see sdHostLXDSocket) and makes
// the LXD profile that forwards 127.0.0.1:sdModelPort in a project
// container to the fake model on the host's loopback. When the test ends
// the project's containers (remote-<project>-*) and the profile are deleted
// (before the bed: cleanups run last first).
func (b *sdBed) projectLXD(model, project string) (profile string) {
	b.t.Helper()
	profile = "rs-systemd-model-" + strings.TrimPrefix(b.name, "rs-systemd-")
	b.must0(sdHostLXC(nil, "profile", "create", profile))
	b.t.Cleanup(func() {
		if out, err := sdHostLXC(nil, "profile", "delete", profile); err != nil {
			b.t.Errorf("delete the profile %s: %v\n%s", profile, err, out)
		}
	})
	b.t.Cleanup(func() {
		out, err := sdHostLXC(nil, "list", "-c", "n", "--format", "csv", "^remote-"+project+"-")
		if err != nil {
			b.t.Errorf("list the containers of project %s: %v\n%s", project, err, out)
		}
		for _, name := range strings.Fields(string(out)) {
			testkit.BehindTheBack(b.t, "delete "+name, func() ([]byte, error) {
				return sdHostLXC(nil, "delete", "--force", name)
			})
		}
	})
	b.must0(sdHostLXC(nil, "profile", "device", "add", profile, "model", "proxy",
		"listen=tcp:127.0.0.1:"+sdModelPort, "connect=tcp:"+strings.TrimPrefix(model, "http://"), "bind=instance"))
	b.must("mkdir", "-p", filepath.Dir(sdHostLXDSocket))
	b.must0(sdHostLXC(nil, "config", "device", "add", b.name, "lxd", "proxy",
		"listen=unix:"+sdHostLXDSocket, "connect=unix:"+sdHostLXDSocket, "bind=container", "mode=0660"))
	return profile
}

// projectContainers lists the host's containers of project.
func (b *sdBed) projectContainers(project string) []string {
	b.t.Helper()
	out, err := sdHostLXC(nil, "list", "-c", "n", "--format", "csv", "^remote-"+project+"-")
	if err != nil {
		b.t.Fatalf("lxc list: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
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
// secrets key made by postinst, remotectl answers. Configured for the
// host's LXD (sdHostLXDSocket: root on the host, a test bed only), the
// packaged daemon runs a project chat of a project made with remotectl in a
// container on that LXD; an edited configuration survives an upgrade
// installed while that run and a loose chat's stream, the upgrade restarts
// the daemon and each run completes exactly once; project rm -purge
// deletes the container; remove stops the service and keeps /etc/remote
// and /var/lib/remote, purge deletes them.
func TestSystemdPackage(t *testing.T) {
	t.Parallel() // its own container
	const parts = 40
	reply := surviveReply(parts, 300*time.Millisecond)
	deb, newer := sdPackages(t)
	claude := testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t, reply, reply) // the project chat's, the loose chat's
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

	// The operator configures it (the conffile, edited) and restarts:
	// loose chats with Claude Code, and project chats on the host's LXD.
	project := testkit.ContainerName("sdpkg")
	profile := b.projectLXD(fake.URL, project)
	b.must0(sdHostLXC(nil, "config", "device", "add", b.name, "model", "proxy",
		"listen=tcp:127.0.0.1:"+sdModelPort, "connect=tcp:"+strings.TrimPrefix(fake.URL, "http://"), "bind=container"))
	b.must0(sdHostLXC(nil, "file", "push", "--create-dirs", "--mode", "0755", claude, b.name+"/opt/claude/claude"))
	b.must("mkdir", "-p", "/root/work", "/root/agent-home")
	config := sdProjectConfig(profile)
	b.write("/etc/remote/remoted.toml", "0640", config)
	b.must("systemctl", "restart", "remoted.service")
	if got := b.show("remoted.service", "StatusText"); got != "serving on /run/remote/remoted.sock" {
		t.Errorf("StatusText=%q with the host's LXD, want serving without a degraded mode:\n%s", got, b.journal("-n", "20"))
	}

	// A project, made by the operator with remotectl; its first prompt
	// creates its container on the host's LXD.
	b.must("remotectl", "project", "create", project, "-provider", "claude", "-autostart=false", "-checkpoints", "off")
	root := b.as("root") // remotectl's user, the project's owner
	st, body := root.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Project: project})
	var pchat api.Chat
	if err := json.Unmarshal(body, &pchat); st != 201 || err != nil {
		t.Fatalf("create a chat in project %s: %d %s", project, st, body)
	}
	streaming := func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 3 || ended(evs) }
	root.prompt(pchat.ID, "count slowly in the container")
	if evs := root.waitEvents(pchat.ID, firstRun, streaming); ended(evs) {
		t.Fatalf("the project run ended before the upgrade: %s", summarize(evs))
	}
	containers := b.projectContainers(project)
	if len(containers) != 1 {
		t.Errorf("project %s's containers on the host's LXD: %q, want one", project, containers)
	}

	// Upgrade while both runs stream: the project chat's and a loose one's.
	chat := b.createChat()
	runID := b.prompt(chat.ID, "count slowly")
	if evs := b.waitEvents(chat.ID, 90*time.Second, streaming); ended(evs) {
		t.Fatalf("the run ended before the upgrade: %s", summarize(evs))
	}
	b.checkRunUnit(runID)
	if evs := root.events(pchat.ID); ended(evs) {
		t.Fatalf("the project run ended before the upgrade: %s", summarize(evs))
	}
	pid := b.show("remoted.service", "MainPID")
	b.aptInstall(newer)
	if got := b.must("dpkg-query", "-W", "-f", "${Version}", "remote"); !strings.HasSuffix(got, "+upgrade1") {
		t.Errorf("installed version %q after the upgrade, want the newer one", got)
	}
	if got := b.show("remoted.service", "MainPID"); got == pid || b.show("remoted.service", "ActiveState") != "active" {
		t.Errorf("remoted.service MainPID %s (was %s), %s after the upgrade: want restarted and active",
			got, pid, b.show("remoted.service", "ActiveState"))
	}
	if got := b.must("cat", "/etc/remote/remoted.toml"); got != strings.TrimSpace(config) {
		t.Errorf("the upgrade replaced the edited /etc/remote/remoted.toml:\n%s", got)
	}
	evs := b.waitEvents(chat.ID, 90*time.Second, ended)
	checkTurn(t, evs, 0, surviveText(parts))
	evs = root.waitEvents(pchat.ID, 90*time.Second, ended)
	checkTurn(t, evs, 0, surviveText(parts))
	b.waitRunsEmpty()
	root.waitRunsEmpty()

	// remotectl project rm -purge deletes the project's container.
	b.must("remotectl", "project", "rm", project, "-purge")
	if left := b.projectContainers(project); len(left) != 0 {
		t.Errorf("project rm -purge left %q on the host's LXD", left)
	}

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
