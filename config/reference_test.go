package config

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// TestEveryKeyHasComment fails when a key of the schema has no doc tag:
// DefaultTOML (remoted -print-default-config, docs/config.md) would print
// it without a comment. The error says what to do.
func TestEveryKeyHasComment(t *testing.T) {
	if err := MissingDoc(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, k := range Keys() {
		got[k.Path] = k.Doc
	}
	// The walk reaches every kind of key: tables, embedded structs, maps of
	// tables and arrays of tables.
	for _, path := range []string{"version", "daemon.min_free", "lxd.urls", "providers", "providers.<id>.binary",
		"providers.<id>.check", "providers.<id>.credentials[].reject_api_key", "projects.pool",
		"projects.limits.memory", "web.users[].password_hash", "notify.headers"} {
		if got[path] == "" {
			t.Errorf("Keys() has no documented key %q", path)
		}
	}
}

// TestMissingDocNamesKeyAndFix walks a schema with an undocumented key
// and checks the error names it, its field and the fix.
func TestMissingDocNamesKeyAndFix(t *testing.T) {
	type inner struct {
		Documented string `toml:"documented" doc:"has one"`
		Bare       int    `toml:"bare"`
	}
	type schema struct {
		Table inner `toml:"table" doc:"a table"`
	}
	err := missingDoc(reflect.TypeFor[schema]())
	if err == nil {
		t.Fatal("missingDoc = nil for a key without a doc tag")
	}
	for _, want := range []string{"key table.bare (field inner.Bare in package config) has no comment",
		"`doc:\"...\"`", "REMOTE_UPDATE_DOCS=1 go test ./internal/docscheck -run TestConfigReference"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "documented") {
		t.Errorf("error names a documented key:\n%v", err)
	}
}

// TestDefaultTOMLParsesToDefault: the printed default configuration is a
// valid file that decodes to exactly Default().
func TestDefaultTOMLParsesToDefault(t *testing.T) {
	out, err := DefaultTOML()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse("default", out)
	if err != nil {
		t.Fatalf("Parse(DefaultTOML()): %v\n%s", err, out)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("Parse(DefaultTOML()) = %+v\nwant Default() = %+v", cfg, Default())
	}
	text := string(out)
	for _, want := range []string{
		"[daemon]\n# the API's Unix socket (absolute); under socket activation systemd's socket is used instead\nsocket = \"/run/remote/remoted.sock\"\n",
		"min_free = \"256MiB\"\n", "session_ttl = \"12h\"\n", "exit_grace = \"10s\"\n", "idle_timeout = \"0s\"\n", "nice = 10\n",
		"#cookie_secure = false\n", "#urls = []\n", "[providers.claude]\n", "[projects.limits]\n", "#env = {}\n",
		"#   password_hash: bcrypt hash, as remote-web -hash-password prints it\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("DefaultTOML lacks %q", want)
		}
	}
}

func TestDurationMarshalTextDropsZeroUnits(t *testing.T) {
	for s, want := range map[string]string{"12h": "12h", "1h30m": "1h30m", "90s": "1m30s", "0s": "0s", "30s": "30s", "2h0m5s": "2h0m5s"} {
		var d Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			t.Fatal(err)
		}
		if b, _ := d.MarshalText(); string(b) != want {
			t.Errorf("MarshalText(%s) = %q, want %q", s, b, want)
		}
	}
}

// FuzzTOMLQuote: every string quote writes, as a value or as a key, reads
// back from TOML as itself.
func FuzzTOMLQuote(f *testing.F) {
	for _, s := range []string{"", "plain", `a "quoted" \ path`, "tab\tnew\nline\x00\x1f\x7f", "é €", "a.b", "-_9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // TOML files are UTF-8; the schema's strings come from one
		}
		var v struct{ K string }
		if _, err := toml.Decode("k = "+quote(s), &v); err != nil || v.K != s {
			t.Fatalf("value %q written as %s read back as %q, %v", s, quote(s), v.K, err)
		}
		var m map[string]int
		if _, err := toml.Decode(tomlKey(s)+" = 1", &m); err != nil || len(m) != 1 || m[s] != 1 {
			t.Fatalf("key %q written as %s read back as %v, %v", s, tomlKey(s), m, err)
		}
	})
}
