package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is one command's build, shared by every test of the process.
type built struct {
	once sync.Once
	path string
	err  error
}

// binaries holds the commands built by Binaries in this test process.
var binaries struct {
	mu     sync.Mutex
	dir    string
	dirErr error
	builds map[string]*built
}

// Binaries returns the paths of this module's commands remote/cmd/<name>,
// in the order named. Each command is built with a plain `go build` (no
// extra flags) at most once per test process, into one temporary directory
// that RemoveBinaries deletes; later calls return the same path. A failed
// build fails t with the compiler's output, and every later call for that
// name fails the same way.
func Binaries(t testing.TB, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := buildCmd(name, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		paths[i] = p
	}
	return paths
}

// RemoveBinaries deletes what Binaries built. Call it from TestMain after
// m.Run; Binaries must not be called afterwards.
func RemoveBinaries() {
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
}

// ShimBinary returns the path of remote-shim built the way make build
// builds it (static: CGO_ENABLED=0), once per test process, like Binaries.
func ShimBinary(t testing.TB) string {
	t.Helper()
	p, err := buildCmd("remote-shim", "remote-shim-static", []string{"CGO_ENABLED=0"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buildCmd builds remote/cmd/<name> once, with env added to the build's
// environment, as the file key, and returns its path.
func buildCmd(name, key string, env []string) (string, error) {
	binaries.mu.Lock()
	if binaries.dir == "" && binaries.dirErr == nil {
		binaries.dir, binaries.dirErr = os.MkdirTemp("", "remote-testbin-")
	}
	dir, dirErr := binaries.dir, binaries.dirErr
	if binaries.builds == nil {
		binaries.builds = map[string]*built{}
	}
	b := binaries.builds[key]
	if b == nil {
		b = &built{}
		binaries.builds[key] = b
	}
	binaries.mu.Unlock()
	if dirErr != nil {
		return "", fmt.Errorf("temporary directory for test binaries: %w", dirErr)
	}
	b.once.Do(func() {
		// go test puts its own toolchain first in PATH; a test binary run
		// directly needs go in PATH too.
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("go build remote/cmd/%s: the go command is not in PATH (go test puts it there): %w", name, err)
			return
		}
		out := filepath.Join(dir, key)
		cmd := exec.Command(goBin, "build", "-o", out, "remote/cmd/"+name)
		cmd.Dir = Root()
		if env != nil {
			cmd.Env = append(os.Environ(), env...)
		}
		if output, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build remote/cmd/%s: %w\n%s", name, err, output)
			return
		}
		b.path = out
	})
	return b.path, b.err
}
