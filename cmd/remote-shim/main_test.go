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
