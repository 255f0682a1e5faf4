package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"remote/internal/testkit"
)

// maxLines is how many non-test Go lines one package directory may hold
// (docs/architecture.md, "The layers"): past it, a concern has grown a name of its own and should
// move out. lxdexec, the client of one REST API, may reach 2,800 (its
// websockets, lxdexec/lxdws, and TLS pin, lxdexec/lxdtls, moved out).
var maxLines = map[string]int{"remote/lxdexec": 2800}

const defaultMaxLines = 2500

// TestPackageSize fails when a package directory holds more non-test Go
// lines than its limit, naming the package and both numbers.
func TestPackageSize(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not in PATH (go test puts it there): %v", err)
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Dir,GoFiles,CgoFiles", "./...")
	cmd.Dir = testkit.Root()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath, Dir   string
			GoFiles, CgoFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		n := 0
		for _, f := range append(p.GoFiles, p.CgoFiles...) {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		limit := defaultMaxLines
		if l, ok := maxLines[p.ImportPath]; ok {
			limit = l
		}
		if n > limit {
			t.Errorf("%s holds %d non-test Go lines, more than %d: move a concern into a package of its own", p.ImportPath, n, limit)
		}
	}
}
