package threatmodel_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"remote/daemon/daemontest"
	"remote/internal/testkit"
	"remote/web"
)

// routeRow is a row of docs/threat-model.md whose first cell is a route:
// "| `POST /v1/chats/{id}/prompt` |" for the daemon, "| `remote-web POST
// /login` |" for remote-web's page origin and "| `preview /` |" for its
// preview origin, each written as its ServeMux pattern (one without a
// method answers every method).
var routeRow = regexp.MustCompile("(?m)^\\| `((?:remote-web |preview )?(?:[A-Z]+ )?/[^`]*)` \\|")

// testName is a test a row cites in its tests cell, e.g. `TestAttackCSRF`
// or `TestPreviewInBrowser/logout`.
var testName = regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]+)(?:/[^`]*)?`")

// routes returns every route that ships, as its row names it.
func routes(t *testing.T) []string {
	t.Helper()
	out := daemontest.New(t, daemontest.Options{}).Server.RouteTable()
	h, err := web.New(web.Options{Socket: filepath.Join(t.TempDir(), "remoted.sock"), PreviewURL: "http://*.localhost:8081"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range h.RouteTable() {
		out = append(out, "remote-web "+p)
	}
	for _, p := range h.PreviewRouteTable() {
		out = append(out, "preview "+p)
	}
	return out
}

func readModel(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testkit.Root(), "docs", "threat-model.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestEveryRouteHasARow: docs/threat-model.md has exactly one row for each
// route the daemon and remote-web serve, and none for a route they do not.
func TestEveryRouteHasARow(t *testing.T) {
	var rows []string
	for _, m := range routeRow.FindAllStringSubmatch(readModel(t), -1) {
		rows = append(rows, m[1])
	}
	shipped := routes(t)
	for _, r := range shipped {
		switch n := count(rows, r); {
		case n == 0:
			t.Errorf("route %s has no row in docs/threat-model.md: add \"| `%s` | attacker | what it guards | defence | tests |\"", r, r)
		case n > 1:
			t.Errorf("docs/threat-model.md has %d rows for route %s; want one", n, r)
		}
	}
	for _, r := range rows {
		if !slices.Contains(shipped, r) {
			t.Errorf("docs/threat-model.md has a row for %s, which nothing serves any more: remove or rename the row", r)
		}
	}
	if len(shipped) < 55 {
		t.Errorf("only %d routes found; is the route table wired? %v", len(shipped), shipped)
	}
}

// TestCitedTestsExist: every test the threat model cites is a Test or
// Fuzz function of the module, so a renamed or deleted test cannot leave
// a defence that only looks tested.
func TestCitedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
	root := testkit.Root()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "build" || d.Name() == "var" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cited := 0
	for i, line := range strings.Split(readModel(t), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range testName.FindAllStringSubmatch(line, -1) {
			cited++
			if !defined[m[1]] {
				t.Errorf("docs/threat-model.md:%d cites %s, which no _test.go file defines", i+1, m[1])
			}
		}
	}
	if cited < 50 {
		t.Errorf("docs/threat-model.md cites only %d tests", cited)
	}
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
