package systemd

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// unitFiles are the units this package ships.
var unitFiles = []string{"remoted.service", "remoted.socket"}

// lookTool finds a systemd tool, or skips (fails in CI) without it.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		testkit.Missing(t, "%s (Debian package systemd)", name)
	}
	return p
}

// TestUnitsVerify runs systemd-analyze verify on every unit, from a copy
// whose ExecStart names an executable that exists here. Any warning about
// them (an unknown key, a bad value) fails the test, since verify reports
// many problems as warnings with exit status 0.
func TestUnitsVerify(t *testing.T) {
	analyze := lookTool(t, "systemd-analyze")
	dir := t.TempDir()
	for _, name := range unitFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "/usr/local/bin/remoted", "/bin/true")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range unitFiles {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, name))
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("systemd-analyze verify %s: %v\n%s", name, err, out)
			}
			// Only our units' warnings count: verify also loads the
			// host's LXD units, whose warnings are not ours to fix.
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "remoted.") {
					t.Errorf("systemd-analyze verify %s: %s", name, line)
				}
			}
		})
	}
}

// unit is a parsed unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// words returns every space-separated word of key's values.
func (u unit) words(section, key string) []string {
	var out []string
	for _, v := range u[section][key] {
		out = append(out, strings.Fields(v)...)
	}
	return out
}

func TestServiceUnitSettings(t *testing.T) {
	u := parseUnit(t, "remoted.service")
	tests := []struct {
		section, key string
		want         []string // every one must be among the key's words
	}{
		{"Unit", "After", []string{"lxd.socket", "lxd.service", "snap.lxd.daemon.service", "remoted.socket"}},
		{"Unit", "Wants", []string{"lxd.socket", "lxd.service", "snap.lxd.daemon.service"}},
		{"Service", "Type", []string{"notify"}},
		{"Service", "Restart", []string{"on-failure"}},
		{"Service", "KillMode", []string{"mixed"}},
		{"Service", "ExecReload", []string{"/bin/sh", "-c", "'kill", "-HUP", "${MAINPID}'"}},
		{"Unit", "StartLimitIntervalSec", []string{"60s"}},
		{"Unit", "StartLimitBurst", []string{"5"}},
		{"Service", "SetCredential", []string{"secrets-key:remoted-secrets-key-file-missing"}},
		{"Service", "RuntimeDirectory", []string{"remote"}},
		{"Service", "RuntimeDirectoryPreserve", []string{"yes"}},
		{"Service", "StateDirectory", []string{"remote"}},
		{"Service", "ReadOnlyPaths", []string{"/etc/remote"}},
		{"Service", "LoadCredential", []string{"secrets-key:/etc/remote/secrets.key"}},
		{"Service", "NoNewPrivileges", []string{"yes"}},
		{"Service", "ProtectSystem", []string{"strict"}},
		{"Service", "ReadWritePaths", []string{"-/var/lib/lxd", "-/var/snap/lxd/common/lxd", "-/home"}},
		{"Service", "PrivateTmp", []string{"yes"}},
		{"Service", "ProtectKernelTunables", []string{"yes"}},
		{"Service", "ProtectKernelModules", []string{"yes"}},
		{"Service", "ProtectControlGroups", []string{"yes"}},
		{"Service", "RestrictSUIDSGID", []string{"yes"}},
		{"Service", "LockPersonality", []string{"yes"}},
		{"Service", "RestrictRealtime", []string{"yes"}},
		{"Service", "SystemCallArchitectures", []string{"native"}},
		{"Service", "RestrictAddressFamilies", []string{"AF_UNIX"}},
		{"Install", "WantedBy", []string{"multi-user.target"}},
		{"Install", "Also", []string{"remoted.socket"}},
	}
	for _, tt := range tests {
		t.Run(tt.section+"/"+tt.key, func(t *testing.T) {
			got := u.words(tt.section, tt.key)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("[%s] %s = %q, missing %q", tt.section, tt.key, got, w)
				}
			}
		})
	}
	if ws := u["Service"]["WatchdogSec"]; len(ws) != 1 || ws[0] == "0" {
		t.Errorf("WatchdogSec = %q, want one non-zero value", ws)
	}
	if slices.Contains(u.words("Unit", "Requires"), "lxd.service") {
		t.Error("Requires=lxd.service would stop remoted from starting where LXD is a snap")
	}
	// Options left out must stay out: each is explained in the unit.
	for _, key := range []string{"PrivateUsers", "ProtectHome", "PrivateNetwork", "MemoryDenyWriteExecute", "DynamicUser", "User"} {
		if _, ok := u["Service"][key]; ok {
			t.Errorf("%s= is set; the unit explains why it must not be", key)
		}
	}
}

// TestAttackUnitConfigWritable: under a real systemd, ConfigurationDirectory=
// makes /etc/remote writable inside the service's sandbox whatever
// ProtectSystem= says, so a loose-chat agent running as root could rewrite
// remoted.toml and secrets.key. The unit must keep /etc/remote read-only
// and hand the key over only as a credential.
func TestAttackUnitConfigWritable(t *testing.T) {
	u := parseUnit(t, "remoted.service")
	for _, key := range []string{"ConfigurationDirectory", "ConfigurationDirectoryMode"} {
		if v, ok := u["Service"][key]; ok {
			t.Errorf("%s=%q makes /etc/remote writable to the service and its agents", key, v)
		}
	}
	if got := u.words("Service", "ProtectSystem"); !slices.Equal(got, []string{"strict"}) {
		t.Errorf("ProtectSystem=%q, want strict", got)
	}
	if got := u.words("Service", "ReadOnlyPaths"); !slices.Contains(got, "/etc/remote") {
		t.Errorf("ReadOnlyPaths=%q, want /etc/remote", got)
	}
	// No writable path may hold /etc/remote (the *Directory= settings name
	// paths under /run and /var, except ConfigurationDirectory=).
	for _, key := range []string{"ReadWritePaths", "BindPaths"} {
		for _, w := range u.words("Service", key) {
			p := strings.TrimLeft(strings.SplitN(w, ":", 2)[0], "-+")
			if p == "/" || p == "/etc" || p == "/etc/remote" || strings.HasPrefix(p, "/etc/remote/") {
				t.Errorf("%s=%s makes /etc/remote writable", key, w)
			}
		}
	}
	if got := u["Service"]["LoadCredential"]; !slices.Equal(got, []string{"secrets-key:/etc/remote/secrets.key"}) {
		t.Errorf("LoadCredential=%q, want the key as the credential secrets-key:/etc/remote/secrets.key", got)
	}
	for _, key := range []string{"Environment", "ExecStart", "ExecStartPre"} {
		for _, v := range u["Service"][key] {
			if strings.Contains(v, "secrets.key") || strings.Contains(v, "secrets_key_file") {
				t.Errorf("%s=%s names the key file: it must reach remoted only as a credential", key, v)
			}
		}
	}
}

func TestSocketUnitSettings(t *testing.T) {
	u := parseUnit(t, "remoted.socket")
	want := map[string]string{
		"ListenStream": "/run/remote/remoted.sock",
		"SocketMode":   "0660",
		"SocketGroup":  "remote",
		"Accept":       "no",
		"Service":      "remoted.service",
	}
	for k, v := range want {
		if got := u["Socket"][k]; len(got) != 1 || got[0] != v {
			t.Errorf("[Socket] %s = %q, want %q", k, got, v)
		}
	}
	if got := u.words("Install", "WantedBy"); !slices.Contains(got, "sockets.target") {
		t.Errorf("[Install] WantedBy = %q, want sockets.target", got)
	}
}

// TestSysusersAndTmpfiles applies both snippets to a scratch root with the
// real systemd tools and checks what they create.
func TestSysusersAndTmpfiles(t *testing.T) {
	testkit.Short(t, "root")
	if os.Geteuid() != 0 {
		testkit.Missing(t, "root (systemd-tmpfiles chowns to root)")
	}
	sysusers := lookTool(t, "systemd-sysusers")
	tmpfiles := lookTool(t, "systemd-tmpfiles")
	root := t.TempDir()
	// With --root, a relative snippet path would be looked up inside root.
	sysusersConf, _ := filepath.Abs("remote.sysusers")
	tmpfilesConf, _ := filepath.Abs("remote.tmpfiles")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sysusers, "--root="+root, sysusersConf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	group, err := os.ReadFile(filepath.Join(root, "etc", "group"))
	if err != nil || !strings.Contains("\n"+string(group), "\nremote:x:") {
		t.Errorf("no group remote in /etc/group: %q, %v", group, err)
	}

	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", tmpfilesConf).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	for path, mode := range map[string]os.FileMode{"/run/remote": 0o755, "/var/lib/remote": 0o700, "/etc/remote": 0o755} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !fi.IsDir() || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want a directory with %v", path, fi.Mode(), mode)
		}
	}
}
