package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestProjectsProvisioningKeys(t *testing.T) {
	tests := []struct {
		name    string
		toml    string
		wantErr string
		check   func(t *testing.T, c Config)
	}{
		{name: "install files and credentials", toml: `
[providers.claude]
check = ["claude", "--version"]
instructions_path = "/root/.claude/CLAUDE.md"
[[providers.claude.install_files]]
host = "/opt/claude"
container = "/usr/local/bin/claude"
mode = "0755"
[[providers.claude.credentials]]
host = "/root/.claude/.credentials.json"
container = "/root/.claude/.credentials.json"
sync = true
[projects]
container_home = "/root"
start_parallel = 8
checkpoint_keep = 5
checkpoint_expiry = "168h"
pool = "btrfs"
[projects.limits]
memory = "2GiB"
processes = 500
`, check: func(t *testing.T, c Config) {
			if c.Projects.CheckpointKeep != 5 || c.Projects.CheckpointExpiry.Duration != 7*24*time.Hour || c.Projects.Pool != "btrfs" || c.Projects.Limits.Memory != "2GiB" || c.Projects.Limits.Processes != 500 {
				t.Fatalf("checkpoint_keep/limits %+v", c.Projects)
			}
			p := c.Providers["claude"]
			if p.Binary != "claude" || len(p.InstallFiles) != 1 || p.InstallFiles[0].Mode != 0o755 || !p.Credentials[0].Sync {
				t.Fatalf("provider %+v", p)
			}
			if c.Projects.StartParallel != 8 || c.Projects.ContainerHome != "/root" {
				t.Fatalf("projects %+v", c.Projects)
			}
		}},
		{name: "bad mode", toml: "[[providers.claude.assets]]\nhost = \"/a\"\ncontainer = \"/b\"\nmode = \"999\"\n", wantErr: "mode"},
		{name: "relative credential", toml: "[[providers.codex.credentials]]\nhost = \"auth.json\"\ncontainer = \"/root/.codex/auth.json\"\n", wantErr: "credentials"},
		{name: "unknown key", toml: "[providers.claude]\ninstal = [\"npm\"]\n", wantErr: "instal"},
		{name: "checkpoint_keep too big", toml: "[projects]\ncheckpoint_keep = 1001\n", wantErr: "checkpoint_keep"},
		{name: "checkpoint_expiry too short", toml: "[projects]\ncheckpoint_expiry = \"30s\"\n", wantErr: "checkpoint_expiry"},
		{name: "negative processes", toml: "[projects.limits]\nprocesses = -1\n", wantErr: "processes"},
		{name: "bad pool", toml: "[projects]\npool = \"../x\"\n", wantErr: "[projects] pool"},
		{name: "negative parallel", toml: "[projects]\nstart_parallel = -1\n", wantErr: "start_parallel"},
		{name: "bad idmap", toml: "[projects]\nidmap = \"private\"\n", wantErr: `[projects] idmap: "private": want auto, isolated or shared`},
		{name: "warm too big", toml: "[projects]\nwarm = 17\n", wantErr: `[projects] warm: 17: want 0 (no warm containers) to 16`},
		{name: "negative warm", toml: "[projects]\nwarm = -1\n", wantErr: `[projects] warm: -1: want 0 (no warm containers) to 16`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("test.toml", []byte(tc.toml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("err %T is not a *config.Error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// FuzzFileMode: a mode that parses is at most 0777 and round-trips.
func FuzzFileMode(f *testing.F) {
	for _, s := range []string{"0644", "0755", "644", "0o600", "999", "", "-1", "07777"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var m FileMode
		if m.UnmarshalText([]byte(s)) != nil {
			return
		}
		if m > 0o777 {
			t.Fatalf("%q gave %o", s, m)
		}
		out, _ := m.MarshalText()
		var back FileMode
		if err := back.UnmarshalText(out); err != nil || back != m {
			t.Fatalf("%q: round trip %q → %o (%v)", s, out, back, err)
		}
	})
}

// TestProjectAllowlists: the allowed_* keys as set; unset, the configured
// default alone ([projects] pool, [lxd] image, [lxd] target) or none;
// malformed entries are refused naming the key and index.
func TestProjectAllowlists(t *testing.T) {
	c := mustParse(t, "[lxd]\nimage = \"debian12\"\ntarget = \"m1\"\n[projects]\npool = \"fast\"\n")
	pools, images, targets := c.ProjectAllowlists()
	if fmt.Sprint(pools, images, targets) != "[fast] [debian12] [m1]" {
		t.Fatalf("defaults: %v %v %v", pools, images, targets)
	}
	pools, images, targets = Default().ProjectAllowlists()
	if fmt.Sprint(pools, images, targets) != "[] [remote-dev] []" {
		t.Fatalf("built-in defaults: %v %v %v", pools, images, targets)
	}
	c = mustParse(t, "[projects]\npool = \"fast\"\nallowed_pools = [\"default\", \"btrfs\"]\nallowed_images = [\"busybox\", \"ubuntu/24.04\"]\nallowed_targets = [\"m2\", \"@gpu\"]\n")
	pools, images, targets = c.ProjectAllowlists()
	if fmt.Sprint(pools, images, targets) != "[default btrfs] [busybox ubuntu/24.04] [m2 @gpu]" {
		t.Fatalf("set: %v %v %v", pools, images, targets)
	}
	for in, want := range map[string]string{
		"[projects]\nallowed_pools = [\"../x\"]\n":          `remoted.toml:2: [projects] allowed_pools[0]: "../x" is not an LXD storage pool name`,
		"[projects]\nallowed_images = [\"a b\"]\n":          `remoted.toml:2: [projects] allowed_images[0]: "a b" is not an image alias or fingerprint`,
		"[projects]\nallowed_targets = [\"m1\", \"a/b\"]\n": `remoted.toml:2: [projects] allowed_targets[1]: "a/b" is not a cluster member name or @group`,
	} {
		if got := parseError(t, in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
