package daemontest_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"remote/daemon/daemontest"
)

// docRoute is a row of a route table in docs/api.md: "| `METHOD /path` |".
var docRoute = regexp.MustCompile("(?m)^\\| `(GET|POST|PUT|PATCH|DELETE) (/[^` ]*)` \\|")

// TestAPIDocMatchesRouteTable: docs/api.md documents every route the daemon
// (as remoted wires it) answers, and no route it does not answer.
func TestAPIDocMatchesRouteTable(t *testing.T) {
	raw, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range docRoute.FindAllStringSubmatch(string(raw), -1) {
		documented = append(documented, m[1]+" "+m[2])
	}
	slices.Sort(documented)
	for i := 1; i < len(documented); i++ {
		if documented[i] == documented[i-1] {
			t.Errorf("docs/api.md documents %s twice", documented[i])
		}
	}
	table := daemontest.New(t, daemontest.Options{}).Server.RouteTable()
	for _, r := range table {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not documented in docs/api.md", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(table, r) {
			t.Errorf("docs/api.md documents %s, which the daemon does not serve", r)
		}
	}
	if len(table) < 30 {
		t.Errorf("the route table has only %d routes: %v", len(table), table)
	}
}

// citation is a guarantee number cited in a Go comment, e.g. "(S12)".
var citation = regexp.MustCompile(`\bS([0-9]{1,2})\b`)

// TestCommentsCiteShippedBehaviour: every guarantee a comment cites as Sn
// is an item of docs/behaviour.md.
func TestCommentsCiteShippedBehaviour(t *testing.T) {
	raw, err := os.ReadFile("../../docs/behaviour.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	checked := 0
	err = filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "var" || strings.HasPrefix(d.Name(), ".") && path != "../..") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(src), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if !ok {
				continue
			}
			for _, m := range citation.FindAllStringSubmatch(comment, -1) {
				checked++
				if !strings.Contains(doc, "**S"+m[1]+" ") {
					t.Errorf("%s:%d cites S%s, which docs/behaviour.md does not define", path, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Errorf("found only %d citations; is the walk rooted at the module?", checked)
	}
}
