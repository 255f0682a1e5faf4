package docscheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// TestArchitectureNamesEveryPackage: docs/architecture.md names every
// package directory of the module (as `dir/sub`, in backquotes), so a new
// package is placed in its layer when it lands and the doc stays the map
// of the code.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not in PATH (go test puts it there): %v", err)
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.Dir}}", "./...")
	cmd.Dir = testkit.Root()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	doc, err := os.ReadFile(filepath.Join(testkit.Root(), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := strings.Fields(string(out))
	if len(dirs) < 50 {
		t.Fatalf("go list found %d packages; expected the whole module", len(dirs))
	}
	for _, dir := range dirs {
		rel, err := filepath.Rel(testkit.Root(), dir)
		if err != nil || rel == "." {
			continue
		}
		if !bytes.Contains(doc, []byte("`"+filepath.ToSlash(rel)+"`")) {
			t.Errorf("docs/architecture.md does not name package %s: add `%s` to its layer in the table", rel, filepath.ToSlash(rel))
		}
	}
}
