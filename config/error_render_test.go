package config

// How config renders its errors: the text of each edge, keys quoted only
// when not bare, at most twenty problems sorted by line (unknown last), and
// a file of up to 1 MiB accepted.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestErrorTextEdges: the file:line prefix leaves out an unknown line (0);
// a top-level key is shown bare, a table's key as "[table] key", an array
// element of a top-level key with its index.
func TestErrorTextEdges(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "remoted.toml", Msg: "bad"}, "remoted.toml: bad"},
		{Error{File: "remoted.toml", Line: 1, Msg: "bad"}, "remoted.toml:1: bad"},
		{Error{Msg: "bad", path: keyPath("log_level")}, "log_level: bad"},
		{Error{Msg: "bad", path: appendIndex(keyPath("allow_uids"), 1)}, "allow_uids[1]: bad"},
		{Error{Msg: "bad", path: keyPath("agent", "credential_sync_timeout")}, "[agent] credential_sync_timeout: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestQuoteKeyBareCharacters: keys of a-z, A-Z, 0-9, '_' and '-' stay bare;
// a key with any other character (the neighbours of those ranges
// included) is quoted.
func TestQuoteKeyBareCharacters(t *testing.T) {
	for _, k := range []string{"az", "AZ", "09", "a_b-c"} {
		if got := quoteKey(k); got != k {
			t.Errorf("quoteKey(%q) = %q, want it bare", k, got)
		}
	}
	for _, k := range []string{"`", "{", "@", "[", "/", ":", "a.b", "é"} {
		if got := quoteKey(k); got != fmt.Sprintf("%q", k) {
			t.Errorf("quoteKey(%q) = %q, want it quoted", k, got)
		}
	}
}

// TestProblemsStopAtTwenty: one parse reports at most 20 problems.
func TestProblemsStopAtTwenty(t *testing.T) {
	var ps problems
	for i := 0; i < 25; i++ {
		ps.add(ErrInvalidValue, keyPath(fmt.Sprint("k", i)), "bad %d", i)
	}
	if len(ps.errs) != 20 {
		t.Fatalf("%d problems kept, want 20", len(ps.errs))
	}
	if !strings.Contains(ps.errs[19].Error(), "bad 19") {
		t.Fatalf("20th problem = %q", ps.errs[19].Error())
	}
}

// TestLoadAcceptsOneMiB: a file of exactly 1 MiB is read and parsed; one
// byte more is refused as too large.
func TestLoadAcceptsOneMiB(t *testing.T) {
	for _, size := range []int{1 << 20, 1<<20 + 1} {
		path := filepath.Join(t.TempDir(), "remoted.toml")
		data := "#" + strings.Repeat("x", size-2) + "\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		tooLarge := err != nil && strings.Contains(err.Error(), "file larger than 1048576 bytes")
		if tooLarge != (size > 1<<20) {
			t.Errorf("Load of %d bytes = %v", size, err)
		}
	}
}

// TestProblemsSortedByLineUnknownLast: problems are reported in file
// order, problems on one line in the order found, and problems with no
// line (a key not in the file) last.
func TestProblemsSortedByLineUnknownLast(t *testing.T) {
	text := "[daemon]\nlog_level = \"x\"\nlog_format = \"y\"\n"
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		t.Fatal(err)
	}
	var ps problems
	ps.add(ErrInvalidValue, keyPath("daemon", "log_format"), "third")
	ps.add(ErrInvalidValue, keyPath("nowhere"), "last")
	ps.add(ErrInvalidValue, keyPath("daemon", "log_level"), "first")
	ps.add(ErrInvalidValue, keyPath("daemon", "log_level"), "second")
	err := locate("f.toml", text, raw, &ps)
	want := "f.toml:2: [daemon] log_level: first\n" +
		"f.toml:2: [daemon] log_level: second\n" +
		"f.toml:3: [daemon] log_format: third\n" +
		"f.toml: nowhere: last"
	if err == nil || err.Error() != want {
		t.Fatalf("locate = %v\nwant %s", err, want)
	}
}
