package config

// The exact edges of the values a user may write (ids, ports, TTLs, URL
// schemes, host and pool names, limits, file modes, sizes), and the line
// an error names in deep dotted keys and array tables.

import (
	"strings"
	"testing"
	"time"
)

// parseError returns Parse's whole error text for in, "" when it parses.
func parseError(t *testing.T, in string) string {
	t.Helper()
	_, err := Parse("remoted.toml", []byte(in))
	if err == nil {
		return ""
	}
	return err.Error()
}

// mustParse parses in and fails the test on an error.
func mustParse(t *testing.T, in string) Config {
	t.Helper()
	c, err := Parse("remoted.toml", []byte(in))
	if err != nil {
		t.Fatalf("Parse(%q) = %v, want it accepted", in, err)
	}
	return c
}

// TestIDsFrom0To4294967294: [daemon] allow_uids, frontend_uids and
// allow_gids accept 0 and 4294967294 and refuse -1 and 4294967295, each
// error naming the element.
func TestIDsFrom0To4294967294(t *testing.T) {
	c := mustParse(t, "[daemon]\nallow_uids = [0, 4294967294]\nfrontend_uids = [0, 4294967294]\nallow_gids = [0, 4294967294]\n")
	for _, ids := range [][]int{c.Daemon.AllowUIDs, c.Daemon.FrontendUIDs, c.Daemon.AllowGIDs} {
		if len(ids) != 2 || ids[0] != 0 || ids[1] != 4294967294 {
			t.Errorf("ids = %v, want [0 4294967294]", ids)
		}
	}
	got := parseError(t, "[daemon]\nallow_uids = [0, -1, 4294967294, 4294967295]\n"+
		"frontend_uids = [0, -1, 4294967294, 4294967295]\nallow_gids = [0, -1, 4294967294, 4294967295]\n")
	want := "remoted.toml:2: [daemon] allow_uids[1]: uid -1 out of range\n" +
		"remoted.toml:2: [daemon] allow_uids[3]: uid 4294967295 out of range\n" +
		"remoted.toml:3: [daemon] frontend_uids[1]: uid -1 out of range\n" +
		"remoted.toml:3: [daemon] frontend_uids[3]: uid 4294967295 out of range\n" +
		"remoted.toml:4: [daemon] allow_gids[1]: gid -1 out of range\n" +
		"remoted.toml:4: [daemon] allow_gids[3]: gid 4294967295 out of range"
	if got != want {
		t.Errorf("Parse =\n%s\nwant\n%s", got, want)
	}
}

// TestPortsFrom1To65535: [web] listen and preview_listen accept ports 1
// and 65535 and refuse 0 and 65536.
func TestPortsFrom1To65535(t *testing.T) {
	for _, port := range []string{"1", "65535"} {
		c := mustParse(t, "[web]\nlisten = \"127.0.0.1:"+port+"\"\n")
		if c.Web.Listen != "127.0.0.1:"+port {
			t.Errorf("listen = %q", c.Web.Listen)
		}
		c = mustParse(t, "[web]\npreview_listen = \"127.0.0.1:"+port+"\"\n")
		if c.Web.PreviewListen != "127.0.0.1:"+port {
			t.Errorf("preview_listen = %q", c.Web.PreviewListen)
		}
	}
	for _, port := range []string{"0", "65536"} {
		for _, key := range []string{"listen", "preview_listen"} {
			got := parseError(t, "[web]\n"+key+" = \"127.0.0.1:"+port+"\"\n")
			want := "remoted.toml:2: [web] " + key + ": \"127.0.0.1:" + port + "\": port must be 1-65535"
			if got != want {
				t.Errorf("%s port %s: %q, want %q", key, port, got, want)
			}
		}
	}
}

// TestSessionTTLZeroRefused: [web] session_ttl = "0s" is refused (a
// session must last), "1s" accepted.
func TestSessionTTLZeroRefused(t *testing.T) {
	if got, want := parseError(t, "[web]\nsession_ttl = \"0s\"\n"), "remoted.toml:2: [web] session_ttl: must be positive, not 0s"; got != want {
		t.Errorf("session_ttl 0s: %q, want %q", got, want)
	}
	if c := mustParse(t, "[web]\nsession_ttl = \"1s\"\n"); c.Web.SessionTTL.Duration != time.Second {
		t.Errorf("session_ttl = %v, want 1s", c.Web.SessionTTL.Duration)
	}
}

// TestPreviewURLSchemes: preview_url may be http or https, nothing else.
func TestPreviewURLSchemes(t *testing.T) {
	const base = "[web]\npreview_listen = \"127.0.0.1:8081\"\npreview_url = "
	for _, u := range []string{"http://*.preview.example.com", "https://*.preview.example.com:8443"} {
		if c := mustParse(t, base+"\""+u+"\"\n"); c.Web.PreviewOrigin() != u {
			t.Errorf("preview origin %q, want %q", c.Web.PreviewOrigin(), u)
		}
	}
	got := parseError(t, base+"\"ftp://*.preview.example.com\"\n")
	want := `remoted.toml:3: [web] preview_url: "ftp://*.preview.example.com": want a wildcard origin like "https://*.preview.example.net" (scheme, "*." and a DNS name, no path): each project's port is served on a host name of its own`
	if got != want {
		t.Errorf("ftp preview_url: %q, want %q", got, want)
	}
}

// TestAllowedHostNameEdges: an allowed_hosts name of 253 characters and a
// label of 63 are accepted, 254 and 64 refused; labels take a-z, A-Z,
// 0-9, '-' and '_' (the ranges' first and last characters included), and
// nothing else.
func TestAllowedHostNameEdges(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	accepted := []string{name253, label63 + ".example", "az.AZ.09", "a-b_c"}
	for _, h := range accepted {
		if !validHostName(h) {
			t.Errorf("validHostName(%q) = false, want true", h)
		}
	}
	c := mustParse(t, "[web]\nallowed_hosts = [\""+strings.Join(accepted, "\", \"")+"\"]\n")
	if len(c.Web.AllowedHosts) != len(accepted) || len(c.Web.AllowedHosts[0]) != 253 {
		t.Errorf("allowed_hosts = %q", c.Web.AllowedHosts)
	}
	for _, h := range []string{name253 + "b", label63 + "a.example", "a~b", "a^b", "a+b", "a/b", "a@b", "a;b"} {
		got := parseError(t, "[web]\nallowed_hosts = [\""+h+"\"]\n")
		want := `remoted.toml:2: [web] allowed_hosts[0]: "` + h + `" is not a host name: give the name alone, without scheme, port or path (e.g. "remote.example.com")`
		if got != want {
			t.Errorf("allowed_hosts %q: %q, want %q", h, got, want)
		}
	}
}

// TestPoolNameEdges: [projects] pool takes names of at most 63 letters,
// digits, '.', '_' and '-' (the ranges' first and last characters
// included); 64 characters or any other character is refused.
func TestPoolNameEdges(t *testing.T) {
	for _, p := range []string{strings.Repeat("p", 63), "azAZ09", "a.b_c-d"} {
		if c := mustParse(t, "[projects]\npool = \""+p+"\"\n"); c.Projects.Pool != p {
			t.Errorf("pool = %q, want %q", c.Projects.Pool, p)
		}
	}
	for _, p := range []string{strings.Repeat("p", 64), "a/b", "a@b", "a:b", "a~b", "a^b", "a+b"} {
		got := parseError(t, "[projects]\npool = \""+p+"\"\n")
		want := "remoted.toml:2: [projects] pool: must be an LXD storage pool name (letters, digits, '.', '_', '-'; at most 63)"
		if got != want {
			t.Errorf("pool %q: %q, want %q", p, got, want)
		}
	}
}

// TestProjectsLimitsEdges: start_parallel up to 64, checkpoint_keep up
// to 1000, checkpoint_expiry from exactly 1m.
func TestProjectsLimitsEdges(t *testing.T) {
	c := mustParse(t, "[projects]\nstart_parallel = 64\ncheckpoint_keep = 1000\ncheckpoint_expiry = \"1m\"\n")
	if c.Projects.StartParallel != 64 || c.Projects.CheckpointKeep != 1000 || c.Projects.CheckpointExpiry.Duration != time.Minute {
		t.Errorf("projects = %d %d %v, want 64 1000 1m0s", c.Projects.StartParallel, c.Projects.CheckpointKeep, c.Projects.CheckpointExpiry.Duration)
	}
	got := parseError(t, "[projects]\nstart_parallel = 65\ncheckpoint_keep = 1001\ncheckpoint_expiry = \"59s\"\n")
	want := "remoted.toml:2: [projects] start_parallel: must be 0 (default) to 64\n" +
		"remoted.toml:3: [projects] checkpoint_keep: must be 0 (default 20) to 1000\n" +
		"remoted.toml:4: [projects] checkpoint_expiry: must be 0 (never) or at least 1m"
	if got != want {
		t.Errorf("Parse =\n%s\nwant\n%s", got, want)
	}
}

// TestFileModeUpTo0777: a file's mode may be "0777", not "01000".
func TestFileModeUpTo0777(t *testing.T) {
	const base = "[[providers.claude.assets]]\nhost = \"/h\"\ncontainer = \"/c\"\nmode = "
	c := mustParse(t, base+"\"0777\"\n")
	if m := c.Providers["claude"].Assets[0].Mode; m != 0o777 {
		t.Errorf("mode = %o, want 777", m)
	}
	got := parseError(t, base+"\"01000\"\n")
	want := `remoted.toml:1: [providers.claude.assets[0]] mode: invalid file mode "01000": want an octal string such as "0644"`
	if got != want {
		t.Errorf("mode 01000: %q, want %q", got, want)
	}
}

// TestSizeEdges: a size of 8388607TiB (2^63 - 2^40 bytes) is accepted,
// 8388608TiB (2^63) is too large; an integer 0 is zero bytes ("off").
func TestSizeEdges(t *testing.T) {
	c := mustParse(t, "[daemon]\nmin_free = \"8388607TiB\"\nmax_run_bytes = 0\n")
	if c.Daemon.MinFree != 9223370937343148032 || c.Daemon.MaxRunBytes != 0 {
		t.Errorf("min_free %d, max_run_bytes %d, want 9223370937343148032, 0", c.Daemon.MinFree, c.Daemon.MaxRunBytes)
	}
	got := parseError(t, "[daemon]\nmin_free = \"8388608TiB\"\n")
	if want := `remoted.toml:2: [daemon] min_free: invalid size "8388608TiB": too large`; got != want {
		t.Errorf("min_free 8388608TiB: %q, want %q", got, want)
	}
}

// TestErrorLineOfDeepDottedKeys: an unknown key standing for a table made
// of dotted keys is reported on the line of its first key that has a
// line: the search goes 8 levels below it (further, no line is named).
func TestErrorLineOfDeepDottedKeys(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"\n\nagent.foo.a.b.c.d.e.f.g.h = 1\n", "remoted.toml:3: [agent] foo: unknown key"},
		{"\n\nagent.foo.a.b.c.d.e.f.g.h.i = 1\n", "remoted.toml: [agent] foo: unknown key"},
		// the first key (sorted) cannot be probed: the next one names the line
		{"[agent]\nfoo.\"a,b\" = 1\nfoo.z = 2\n", "remoted.toml:3: [agent] foo: unknown key"},
	} {
		if got := parseError(t, tc.in); got != tc.want {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestErrorLineOfMiddleArrayTable: a problem in the second of three
// [[web.users]] tables names the second header's line.
func TestErrorLineOfMiddleArrayTable(t *testing.T) {
	in := "[[web.users]]\nname = \"a\"\npassword_hash = \"h\"\n\n" +
		"[[web.users]]\nname = \"\"\npassword_hash = \"h\"\n\n" +
		"[[web.users]]\nname = \"c\"\npassword_hash = \"h\"\n"
	if got, want := parseError(t, in), "remoted.toml:5: [web.users[1]] name: must not be empty"; got != want {
		t.Errorf("Parse = %q, want %q", got, want)
	}
}
