package keyfile

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k1, err := LoadOrCreate(path)
	if err != nil || len(k1) != Size {
		t.Fatalf("create: %d bytes, %v", len(k1), err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	k2, err := LoadOrCreate(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("reload gave a different key (%v)", err)
	}
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
		mention string
	}{
		{"group readable", k1, 0o640, "0640"},
		{"world readable", k1, 0o604, "0604"},
		{"too short", k1[:16], 0o600, "16 bytes"},
		{"too long", append(k1, '\n'), 0o600, "33 bytes"},
		{"systemd credential 0400", k1, 0o400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_"))
			if err := os.WriteFile(p, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			key, err := LoadOrCreate(p)
			if tt.mention == "" {
				if err != nil || !bytes.Equal(key, k1) {
					t.Fatalf("LoadOrCreate: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want ErrInvalid naming %s and %q", err, p, tt.mention)
			}
		})
	}
}

// keyFileChildEnv makes the test binary a child that creates a key file
// with a file-size limit of 0 bytes (every write fails with EFBIG).
const keyFileChildEnv = "REMOTE_KEYFILE_CHILD"

// A key file that cannot be written (here: the file-size limit, EFBIG)
// makes LoadOrCreate fail and leaves no key file behind, rather than an
// empty one that every later start would refuse.
func TestKeyFileWriteFailureLeavesNoFile(t *testing.T) {
	if path := os.Getenv(keyFileChildEnv); path != "" {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(0)
		}
		key, err := LoadOrCreate(path)
		_, serr := os.Lstat(path)
		fmt.Printf("key %d bytes; error %v; file exists %v\n", len(key), err, serr == nil)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "secrets.key")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyFileWriteFailureLeavesNoFile$")
	cmd.Env = append(os.Environ(), keyFileChildEnv+"="+path)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v; stdout %q", err, stdout.String())
	}
	got := strings.TrimSpace(stdout.String())
	want := "key 0 bytes; error create key file " + path + ": write " + path + ": file too large; file exists false"
	if got != want {
		t.Fatalf("child printed\n  %q\nwant\n  %q", got, want)
	}
	// Without the limit the same path works: nothing was left in the way.
	if key, err := LoadOrCreate(path); err != nil || len(key) != 32 {
		t.Fatalf("LoadOrCreate after the failure: %d bytes, %v", len(key), err)
	}
}
