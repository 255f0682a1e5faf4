package deps

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// domain are the packages that hold what Remote does (chats, runs, the
// store, the containers' contents, the agent CLIs' protocols), as opposed
// to how it is reached (the routes, the socket, the web proxy) or how it
// reaches LXD and image servers. Each pattern covers its sub-packages, so
// a package added under one of them is in the domain from its first
// commit.
var domain = []string{
	"remote/daemon/prompt", // and daemon/prompt/projection
	"remote/daemon/runhub",
	"remote/daemon/workspace",
	"remote/daemon/store", // and eventjson, keyfile
	"remote/daemon/storageguard",
	"remote/provisioning", // and checkpoint, clidevice, gitrepo, placement, preview, warm
	"remote/providers",    // the contracts, the run launchers and shim, the adapters
}

// domainHTTPExceptions are the domain packages that import net/http
// themselves, each with the reason. The list is exact: an exception that
// no longer imports net/http fails the test until it is removed.
var domainHTTPExceptions = map[string]string{
	"remote/provisioning/lxdconn":  "the LXD connection itself: it queries LXD's REST API (http.MethodGet on lxdexec.Query) to check profiles at start-up",
	"remote/provisioning/lxdimage": "reads the development image's alias from remote image servers (simplestreams or LXD) over HTTPS with its own http.Client",
}

// domainHTTPViolations lists the packages of g in the domain that import
// net/http directly without an exception, and the exceptions that are
// wrong (no such package, or it no longer imports net/http).
func domainHTTPViolations(g graph) []string {
	var out []string
	for p, q := range g {
		inDomain := slices.ContainsFunc(domain, func(d string) bool { return matches(p, d) })
		if !inDomain || q.Standard {
			continue
		}
		_, excepted := domainHTTPExceptions[p]
		if slices.Contains(q.Imports, "net/http") && !excepted {
			out = append(out, fmt.Sprintf("%s imports net/http: the domain speaks no HTTP (the routes, the socket and the LXD client do); move the HTTP part out, or add an exception with its reason", p))
		}
	}
	for p := range domainHTTPExceptions {
		if q := g[p]; q == nil {
			out = append(out, fmt.Sprintf("exception %s names no package of the module: remove it", p))
		} else if !slices.Contains(q.Imports, "net/http") {
			out = append(out, fmt.Sprintf("exception %s no longer imports net/http: remove it", p))
		}
	}
	slices.Sort(out)
	return out
}

// TestDomainImportsNoHTTP: the domain packages do not import net/http
// themselves (they may reach it through lxdexec or metrics, which are not
// domain), but for the listed exceptions.
func TestDomainImportsNoHTTP(t *testing.T) {
	for _, v := range domainHTTPViolations(loadGraph(t)) {
		t.Error(v)
	}
}

// TestDomainImportsNoHTTPCatch checks the checker on a hand-made graph: a
// domain package importing net/http is reported, one outside the domain
// or excepted is not, and a stale exception is reported.
func TestDomainImportsNoHTTPCatch(t *testing.T) {
	g := graph{
		"remote/daemon/runhub":          {ImportPath: "remote/daemon/runhub", Imports: []string{"net/http"}},
		"remote/daemon/store/eventjson": {ImportPath: "remote/daemon/store/eventjson", Imports: []string{"encoding/json"}},
		"remote/daemon/socket":          {ImportPath: "remote/daemon/socket", Imports: []string{"net/http"}},
		"remote/provisioning/lxdconn":   {ImportPath: "remote/provisioning/lxdconn", Imports: []string{"net/http"}},
		"remote/provisioning/lxdimage":  {ImportPath: "remote/provisioning/lxdimage", Imports: []string{"fmt"}},
		"net/http":                      {ImportPath: "net/http", Standard: true},
	}
	got := strings.Join(domainHTTPViolations(g), "\n")
	for _, want := range []string{
		"remote/daemon/runhub imports net/http",
		"exception remote/provisioning/lxdimage no longer imports net/http",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations miss %q; got:\n%s", want, got)
		}
	}
	for _, clean := range []string{"remote/daemon/socket", "remote/daemon/store/eventjson", "remote/provisioning/lxdconn "} {
		if strings.Contains(got, clean) {
			t.Errorf("violations wrongly name %q; got:\n%s", clean, got)
		}
	}
}
