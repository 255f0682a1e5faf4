package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"version"}, 0, "remote-shim ", ""},
		{nil, 2, "", "usage:"},
		{[]string{"start"}, 2, "", `unknown command "start"`},
		{[]string{"serve"}, 2, "", `--dir must be an absolute path, got ""`},
		{[]string{"serve", "--dir", "runs/x"}, 2, "", `--dir must be an absolute path, got "runs/x"`},
		{[]string{"serve", "--dir", "/x", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"attach", "--dir", "x"}, 2, "", `--dir must be an absolute path, got "x"`},
		{[]string{"attach", "--dir", "/nonexistent/run"}, 3, "", "run directory /nonexistent/run is gone"},
	} {
		var out, errOut bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &out, &errOut)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errOut.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

// TestServeRefusesAnExistingDirectory: serve never takes over a run
// directory that exists (another run's, or a stale one).
func TestServeRefusesAnExistingDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	if code := run([]string{"serve", "--dir", dir}, strings.NewReader(""), &bytes.Buffer{}, &errOut); code != 1 || !strings.Contains(errOut.String(), "run directory "+dir+" already exists") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("serve removed a directory it did not create: %v", err)
	}
}

// TestStatTerminal: the controlling terminal is the seventh field of a
// stat line, counted after the command name, which may hold ") " itself.
func TestStatTerminal(t *testing.T) {
	for _, tc := range []struct {
		stat string
		want int
		err  string
	}{
		{"4242 (sh) S 1 4242 4242 34816 4242 4194560 110 0", 34816, ""},
		{"4242 (a) S 1 2 3 (b)) R 1 4242 4242 0 -1 4194560", 0, ""},
		{"4242 (remote-shim) S 1 4242 4242 0 -1 4194560", 0, ""},
		{"4242 sh S 1 4242 4242 0", 0, "no command name"},
		{"4242 (sh) S 1 4242", 0, "3 fields after the command name, want at least 5"},
		{"4242 (sh) S 1 4242 4242 tty", 0, `tty_nr "tty"`},
	} {
		got, err := statTerminal(tc.stat)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("statTerminal(%q) = %d, %v; want an error with %q", tc.stat, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("statTerminal(%q) = %d, %v; want %d", tc.stat, got, err, tc.want)
		}
	}
}

func FuzzStatTerminal(f *testing.F) {
	f.Add("4242 (sh) S 1 4242 4242 34816 4242 4194560 110 0")
	f.Add("1 (a) b) S 0 1 1 0 -1")
	f.Add(")")
	f.Fuzz(func(t *testing.T, stat string) {
		tty, err := statTerminal(stat)
		if err != nil && tty != 0 {
			t.Fatalf("statTerminal(%q) = %d with an error %v", stat, tty, err)
		}
	})
}
