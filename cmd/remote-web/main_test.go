package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func stdinFile(t *testing.T, content string) *os.File {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stdin")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestHashPasswordFlag(t *testing.T) {
	tests := []struct {
		name, stdin string
		code        int
		verify      string
	}{
		{"crlf line", "s3cret pass\r\n", 0, "s3cret pass"},
		{"empty", "\n", 1, ""},
		{"too long", strings.Repeat("x", 80) + "\n", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"-hash-password"}, stdinFile(t, tt.stdin), &out, &errb)
			if code != tt.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.code, errb.String())
			}
			if tt.code != 0 {
				if errb.Len() == 0 {
					t.Error("failure without a message")
				}
				return
			}
			hash := strings.TrimSpace(out.String())
			if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(tt.verify)); err != nil {
				t.Fatalf("printed hash %q does not verify: %v", hash, err)
			}
			if strings.Contains(out.String()+errb.String(), tt.verify) {
				t.Error("the password was echoed")
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[web]\nlisten = \"nope\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Previews under the page's registrable domain (listen's host) over
	// plain http: refused before listening, saying why.
	sameSite := filepath.Join(dir, "samesite.toml")
	if err := os.WriteFile(sameSite, []byte("[web]\nlisten = \"remote.lan:8080\"\npreview_listen = \"127.0.0.1:8081\"\npreview_url = \"http://*.preview.remote.lan:8081\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"invalid listen", []string{"-config", bad}, 1, "listen"},
		{"same-site previews over http", []string{"-config", sameSite}, 1, "shares the parent domain"},
		{"missing file", []string{"-config", filepath.Join(dir, "missing.toml")}, 1, "missing.toml"},
		{"unknown flag", []string{"-bogus"}, 2, "bogus"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(tt.args, stdinFile(t, ""), &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.want) {
				t.Fatalf("exit %d stderr %q; want %d mentioning %q", code, errb.String(), tt.code, tt.want)
			}
		})
	}
}
