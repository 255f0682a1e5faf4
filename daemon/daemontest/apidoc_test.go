package daemontest_test

import (
	"os"
	"regexp"
	"slices"
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
