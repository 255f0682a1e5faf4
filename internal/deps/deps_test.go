package deps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// The module's import path; every rule below names packages under it.
const module = "remote"

// rule says that no package matching From may depend, directly or through
// other packages, on a package matching one of Never. A pattern matches the
// package with that path and every package under it ("remote/daemon"
// matches remote/daemon and remote/daemon/store). Never = {module} means
// "nothing of ours". Only What ships is checked: the rules are about the
// packages' own (non-test) imports; tests may reach further (a web test may
// open a store to set up a chat).
type rule struct {
	From  string
	Never []string
	// ThirdParty, when not nil, is the complete list of modules outside
	// the standard library and this module that From may import directly.
	ThirdParty []string
	// Ours, when not nil, is the complete list of this module's packages
	// From may import directly (Never = {module} with exceptions).
	Ours []string
	Why  string
}

// rules are design.md's "Never" edges and "may import" column, plus the
// two that keep the layering honest: clients never import server code,
// and nothing that ships depends on a test helper (see testHelper).
var rules = []rule{
	{From: "remote/lxdexec", Never: []string{module}, ThirdParty: []string{"github.com/gorilla/websocket"},
		Why: "lxdexec is our LXD REST client and imports nothing of ours (design: lxdexec → anything of ours)"},
	{From: "remote/lxdexec/lxdws", Never: []string{module}, ThirdParty: []string{"github.com/gorilla/websocket"},
		Why: "lxdws is LXD's websockets under lxdexec, which imports it: the standard library and gorilla/websocket only, never lxdexec"},
	{From: "remote/lxdexec/lxdtls", Never: []string{module}, ThirdParty: []string{},
		Why: "lxdtls is lxdexec's TLS configuration and certificate pin, which lxdexec imports: the standard library only, never lxdexec"},
	{From: "remote/config", Never: []string{module}, ThirdParty: []string{"github.com/BurntSushi/toml"},
		Why: "config is the TOML schema, stdlib and toml only (design: config → anything of ours)"},
	{From: "remote/api", Never: []string{module}, ThirdParty: []string{},
		Why: "api holds the wire types daemon, remotectl and web share; it depends on nothing so no client imports server code"},
	{From: "remote/forge", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/web", "remote/client", "remote/api", "remote/cmd"},
		ThirdParty: []string{}, Ours: []string{"remote/config"},
		Why: "forge opens pull requests through a forge's REST API: config and the standard library only; its error classes are errdefs marker methods"},
	{From: "remote/internal/errdefs", Never: []string{module}, ThirdParty: []string{},
		Why: "the error taxonomy is imported by every layer, so it imports nothing of ours"},
	{From: "remote/internal/version", Never: []string{module}, ThirdParty: []string{},
		Why: "the version stamp is imported by every binary, so it imports nothing of ours"},
	{From: "remote/internal/threatmodel", Never: []string{module}, ThirdParty: []string{},
		Why: "threatmodel holds no code, only the test that keeps docs/threat-model.md in step with the route tables"},
	{From: "remote/internal/release", Never: []string{module}, ThirdParty: []string{},
		Why: "release is tests only (the Debian package of make release); it ships nothing and imports nothing"},
	{From: "remote/internal/docscheck", Never: []string{module}, ThirdParty: []string{},
		Why: "docscheck is tests only (the docs' links and the config reference); it ships nothing and imports nothing"},
	{From: "remote/systemd", Never: []string{module},
		Why: "systemd is readiness/watchdog notification and socket activation: stdlib (design table)"},
	{From: "remote/providers", Never: []string{"remote/daemon", "remote/provisioning", "remote/api", "remote/client", "remote/web", "remote/config"},
		Why: "a provider sees only RunRequest and the ports it is handed (design: providers → daemon never; providers import lxdexec's exec only)"},
	{From: "remote/providers/runner", Never: []string{"remote/providers/probe", "remote/providers/claude", "remote/providers/codex", "remote/providers/kimi", "remote/providers/minimax", "remote/providers/antigravity"},
		Why: "runner is the launch contract the probes and adapters build on; it never imports them (docs/architecture.md, the layers)"},
	{From: "remote/providers/probe", Never: []string{"remote/providers/claude", "remote/providers/codex", "remote/providers/kimi", "remote/providers/minimax", "remote/providers/antigravity"},
		Why: "probe runs a CLI's readiness and login through a providers.Launcher; adapters import it, never the reverse"},
	{From: "remote/provisioning", Never: []string{"remote/daemon", "remote/web", "remote/client"},
		Why: "provisioning prepares containers for the daemon and never reaches back into it (design: provisioning → daemon)"},
	{From: "remote/provisioning/checkpoint", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "checkpoint is handed what it needs by provisioning, which imports it: it never imports provisioning, a provider or the daemon (docs/architecture.md, the layers)"},
	{From: "remote/provisioning/preview", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "preview keeps the preview proxy devices for provisioning, which imports it: it never imports provisioning, a provider or the daemon (docs/architecture.md, the layers)"},
	{From: "remote/provisioning/netdev", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "netdev keeps a project container's network devices for provisioning, which imports it: it never imports provisioning, a provider or the daemon"},
	{From: "remote/daemon/egress", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/config", "remote/web", "remote/client"},
		Why: "the egress proxy decides by host and port alone: it never reaches into the daemon, LXD or the config (cmd/remoted wires it)"},
	{From: "remote/provisioning/lxdconn", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client", "remote/api"},
		Why: "lxdconn is the LXD connection under provisioning and cmd/remoted: lxdexec and errdefs only (docs/architecture.md, the layers)"},
	{From: "remote/provisioning/placement", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "placement answers cluster, pool and limit questions for provisioning, which imports it: it never imports provisioning, a provider or the daemon (docs/architecture.md, the layers)"},
	{From: "remote/provisioning/clidevice", Never: []string{"remote/provisioning", "remote/providers/runner", "remote/providers/claude", "remote/providers/codex", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "clidevice mounts or pushes a CLI store version for provisioning, which imports it: lxdexec and the store's types only (docs/architecture.md, the layers)"},
	{From: "remote/provisioning/gitrepo", Never: []string{"remote/provisioning", "remote/providers/runner", "remote/providers/claude", "remote/providers/codex", "remote/daemon", "remote/config", "remote/web", "remote/client"}, ThirdParty: []string{},
		Why: "gitrepo runs git in a project's container for provisioning and the repository routes: lxdexec, errdefs, api and the providers' contracts only"},
	{From: "remote/provisioning/reconcile", Never: []string{"remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Ours: []string{"remote/api", "remote/lxdexec", "remote/provisioning/lxdconn", "remote/provisioning/placement"},
		Why:  "reconcile keeps stored project status true to LXD for provisioning, which imports it: it starts containers through the Start function it is handed, never by importing provisioning, a provider or the daemon"},
	{From: "remote/provisioning/envsetup", Never: []string{"remote/provisioning", "remote/providers/runner", "remote/providers/claude", "remote/providers/codex", "remote/daemon", "remote/config", "remote/web", "remote/client"},
		Why: "envsetup sets a project's environment up for provisioning, which imports it and hands it the container, the secrets and the lifecycle lock: it never imports provisioning, the daemon or config"},
	{From: "remote/provisioning/warm", Never: []string{"remote/provisioning", "remote/providers", "remote/daemon", "remote/config", "remote/web", "remote/client", "remote/api"},
		Why: "warm keeps the warm container pool for provisioning and the project routes: lxdexec only; provisioning hands it the container create"},
	{From: "remote/daemon/repoapi", Never: []string{"remote/daemon/projectapi", "remote/daemon/system", "remote/config", "remote/web", "remote/client"},
		Why: "the repository routes reach chats through the interfaces the composition root hands them and git through gitrepo; never the project routes, the root, a provider adapter or config"},
	{From: "remote/daemon/system", Never: []string{"remote/config", "remote/web", "remote/client", "remote/cmd"},
		Why: "the composition root builds the daemon from plain option values: the config stays in cmd/remoted, and no binary or client is wired here"},
	{From: "remote/daemon/schedule", Never: []string{"remote/daemon/projectapi", "remote/daemon/repoapi", "remote/daemon/scheduleapi", "remote/config", "remote/web", "remote/client"},
		Ours:       []string{"remote/api", "remote/daemon/prompt", "remote/daemon/runhub", "remote/daemon/store", "remote/internal/errdefs"},
		ThirdParty: []string{"github.com/hashicorp/go-hclog", "github.com/robfig/cron/v3"},
		Why:        "the scheduler is domain: the store, the prompt service's types, cron's parser; never net/http or the daemon's routes (daemon/scheduleapi serves them)"},
	{From: "remote/daemon/scheduleapi", Never: []string{"remote/daemon/projectapi", "remote/daemon/repoapi", "remote/config", "remote/web", "remote/client"},
		Why: "the schedule routes reach the scheduler and the daemon's route helpers only"},
	{From: "remote/daemon/hostapi", Never: []string{"remote/daemon/projectapi", "remote/daemon/repoapi", "remote/daemon/scheduleapi", "remote/daemon/system", "remote/config", "remote/web", "remote/client"},
		Why: "the host administration routes call lxdimage and the CLI store through the daemon's route helpers: never the composition root or another route package"},
	{From: "remote/daemon/loginapi", Never: []string{"remote/daemon/projectapi", "remote/daemon/repoapi", "remote/daemon/doctor", "remote/providers/claude", "remote/providers/codex", "remote/config", "remote/web", "remote/client"},
		Why: "the login routes drive a CLI's login through the providers' LoginDriver and join the table as a RouteProvider: never the other route providers, a provider adapter or config"},
	{From: "remote/daemon/eventstream", Never: []string{"remote/daemon/prompt", "remote/daemon/projectapi", "remote/daemon/repoapi", "remote/daemon/loginapi", "remote/provisioning", "remote/lxdexec", "remote/config", "remote/web", "remote/client"},
		Ours: []string{"remote/api", "remote/daemon/runhub"},
		Why:  "eventstream writes a chat's events to an HTTP client for package daemon, which imports it: api and the run hub only, never daemon, the prompt service, a route provider, provisioning or config"},
	{From: "remote/daemon/prompt/projection", Never: []string{"remote/daemon", "remote/provisioning", "remote/lxdexec", "remote/config", "remote/web", "remote/client", "remote/providers/runner"},
		Why: "projection is pure: a provider event in, a chat event out; api and providers only (docs/architecture.md, the layers)"},
	{From: "remote/daemon/storageguard", Never: []string{"remote/daemon/prompt", "remote/daemon/projectapi", "remote/daemon/repoapi", "remote/provisioning", "remote/providers/runner", "remote/providers/claude", "remote/providers/codex", "remote/lxdexec", "remote/config", "remote/web", "remote/client"},
		Why: "the storage guard bounds what the store holds for the prompt service, which imports it: api, the store, the run hub, metrics and errdefs; never the prompt service, the routes, provisioning, a provider adapter or config (providers only through the run hub)"},
	{From: "remote/daemon/fork", Never: []string{"remote/daemon/prompt", "remote/daemon/projectapi", "remote/provisioning", "remote/providers/runner", "remote/providers/claude", "remote/providers/codex", "remote/lxdexec", "remote/config", "remote/web", "remote/client"},
		Why: "fork at a turn works on the store's chats and a ContainerForker; package daemon imports it, never the reverse (docs/architecture.md, the layers)"},
	{From: "remote/daemon/store/keyfile", Never: []string{"remote/api", "remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/config", "remote/web", "remote/client"}, ThirdParty: []string{},
		Why: "keyfile makes and checks the secrets key file: errdefs and the standard library only (out of the store: docs/architecture.md, the layers)"},
	{From: "remote/daemon/store/eventjson", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/config", "remote/web", "remote/client", "remote/cmd"},
		ThirdParty: []string{}, Ours: []string{"remote/api"},
		Why: "eventjson decodes and sizes events as the store writes them: api and the standard library only (out of the store, which it must not import)"},
	{From: "remote/provisioning/lxdimage", Never: []string{"remote/provisioning/checkpoint", "remote/provisioning/preview", "remote/daemon", "remote/providers", "remote/config", "remote/web", "remote/client", "remote/api"},
		Why: "lxdimage is what the daemon knows of LXD's images: lxdexec, lxdconn and errdefs only"},
	{From: "remote/internal/testkit/simplestreams", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/config", "remote/web", "remote/client", "remote/api"}, ThirdParty: []string{},
		Why: "the test image server speaks simplestreams as LXD reads it, independent of the product code it tests: testkit and the standard library only"},
	{From: "remote/internal/procwait", Never: []string{module}, ThirdParty: []string{"golang.org/x/sys"},
		Why: "procwait waits for a child's exit through the poller: the standard library and x/sys only"},
	{From: "remote/internal/reaper", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/config", "remote/web", "remote/client", "remote/api", "remote/cmd"}, ThirdParty: []string{"golang.org/x/sys"}, Ours: []string{"remote/internal/procwait"},
		Why: "reaper is the shim's part as its CLI's parent (subreaper, exit without reaping): the standard library, x/sys and procwait only"},
	{From: "remote/providers/shim/fsop", Never: []string{module}, ThirdParty: []string{"golang.org/x/sys"},
		Why: "fsop runs inside containers as remote-shim files (lstat, open regular files only): the standard library and x/sys only"},
	{From: "remote/providers/shim/live", Never: []string{module}, ThirdParty: []string{},
		Why: "the live window is memory blocks and spans: the standard library only"},
	{From: "remote/internal/revert", Never: []string{module}, ThirdParty: []string{},
		Why: "revert is LXD's undo-steps pattern: the standard library only"},
	{From: "remote/internal/lazyre", Never: []string{module}, ThirdParty: []string{},
		Why: "lazyre compiles a package-level pattern on first use: the standard library only (start-up CPU: docs/benchmarks.md, Re-attach)"},
	{From: "remote/internal/keyed", Never: []string{module}, ThirdParty: []string{},
		Why: "keyed is two per-key concurrency tools: the standard library only"},
	{From: "remote/daemon/socket", Never: []string{module}, ThirdParty: []string{},
		Why: "socket creates the API's Unix socket: stdlib only (docs/architecture.md, the layers)"},
	{From: "remote/web", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/client"},
		Why: "remote-web is a thin proxy to the daemon's socket: config and the API's wire types only (design: web → daemon internals)"},
	{From: "remote/client", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/web", "remote/config"},
		Why: "the client speaks the API over the socket and never imports server code (design: wire types in their own package)"},
	{From: "remote/cmd/remotectl", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/web"},
		Why: "remotectl is a client of the socket, never linked with server code"},
	{From: "remote/cmd/remotectl/render", Never: []string{"remote/client", "remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/web", "remote/config"},
		ThirdParty: []string{}, Ours: []string{"remote/api"},
		Why: "render prints a chat's events on a terminal: the API's wire types and the standard library only; never the client or the daemon"},
	{From: "remote/cmd/remote-web", Never: []string{"remote/daemon", "remote/provisioning", "remote/providers", "remote/lxdexec", "remote/client"},
		Why: "remote-web is the browser proxy: flags and wiring of package web"},
}

// testHelper reports whether p is a package for tests only: internal/testkit
// and its fakes, and the …test helper packages (client/clienttest,
// providers/runner/runnertest, a future API test harness).
func testHelper(p string) bool {
	return matches(p, "remote/internal/testkit") || (matches(p, module) && strings.HasSuffix(path.Base(p), "test"))
}

// matches reports whether import path p is pattern or under it.
func matches(p, pattern string) bool {
	return p == pattern || strings.HasPrefix(p, pattern+"/")
}

// pkg is what `go list -deps -json` says about one package.
type pkg struct {
	ImportPath string
	Imports    []string
	Standard   bool
	Module     *struct{ Path string }
}

// graph is the module's non-test import graph with every dependency.
type graph map[string]*pkg

func loadGraph(t *testing.T) graph {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not in PATH (go test puts it there): %v", err)
	}
	cmd := exec.Command(goBin, "list", "-deps", "-json=ImportPath,Imports,Standard,Module", "./...")
	cmd.Dir = testkit.Root()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		g[p.ImportPath] = &p
	}
	return g
}

// path returns the shortest import chain from "from" to a package for which
// bad is true, or nil when there is none.
func (g graph) path(from string, bad func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		p := g[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = cur
			if bad(imp) {
				chain := []string{imp}
				for c := cur; c != ""; c = prev[c] {
					chain = append(chain, c)
				}
				slices.Reverse(chain)
				return chain
			}
			queue = append(queue, imp)
		}
	}
	return nil
}

// violations checks every rule against g and returns one line per broken
// rule and package.
func violations(g graph, rules []rule) []string {
	var out []string
	var ours []string
	for p := range g {
		if matches(p, module) {
			ours = append(ours, p)
		}
	}
	slices.Sort(ours)
	for _, p := range ours {
		for _, r := range rules {
			if !matches(p, r.From) {
				continue
			}
			forbidden := func(q string) bool {
				if matches(q, r.From) {
					return false // a package's own sub-packages are its business
				}
				return slices.ContainsFunc(r.Never, func(n string) bool { return matches(q, n) })
			}
			if chain := g.path(p, forbidden); chain != nil {
				out = append(out, fmt.Sprintf("%s must not depend on %s: %s\n\twhy: %s", p, chain[len(chain)-1], strings.Join(chain, " → "), r.Why))
			}
			for _, imp := range g[p].Imports {
				if r.Ours != nil && matches(imp, module) && !matches(imp, r.From) && !slices.Contains(r.Ours, imp) {
					out = append(out, fmt.Sprintf("%s imports %s, which is not in its allowed list %q\n\twhy: %s", p, imp, r.Ours, r.Why))
				}
			}
			if r.ThirdParty == nil {
				continue
			}
			for _, imp := range g[p].Imports {
				q := g[imp]
				if q == nil || q.Standard || matches(imp, module) {
					continue
				}
				mod := imp
				if q.Module != nil {
					mod = q.Module.Path
				}
				if !slices.Contains(r.ThirdParty, mod) {
					out = append(out, fmt.Sprintf("%s imports %s (module %s), which is not in its allowed list %q\n\twhy: %s", p, imp, mod, r.ThirdParty, r.Why))
				}
			}
		}
		if !testHelper(p) {
			if chain := g.path(p, testHelper); chain != nil {
				out = append(out, fmt.Sprintf("%s must not depend on the test helper %s: %s\n\twhy: test helpers never ship in the binaries", p, chain[len(chain)-1], strings.Join(chain, " → ")))
			}
		}
	}
	return out
}

// TestImportRules fails when a package of this module depends on what the
// design forbids; each failure names the import chain and the rule's reason.
func TestImportRules(t *testing.T) {
	g := loadGraph(t)
	// The rules must name packages that exist (or are planned: errdefs),
	// so a rename cannot silently turn a rule off.
	for _, r := range rules {
		found := false
		for p := range g {
			found = found || matches(p, r.From)
		}
		if !found && r.From != "remote/internal/errdefs" {
			t.Errorf("rule for %s matches no package of the module: renamed? update deps_test.go", r.From)
		}
	}
	for _, v := range violations(g, rules) {
		t.Error(v)
	}
}

// rootImporters are the only packages that may import the composition
// root, daemon/system: the binary and the test daemon, which build the
// daemon through the same system.New.
var rootImporters = []string{"remote/cmd/remoted", "remote/daemon/daemontest"}

// TestOnlyBinariesImportTheRoot fails when a package other than
// rootImporters imports daemon/system: a route or domain package reaching
// the root would reach every part of the daemon.
func TestOnlyBinariesImportTheRoot(t *testing.T) {
	g := loadGraph(t)
	if g["remote/daemon/system"] == nil {
		t.Fatal("remote/daemon/system is not in the module: renamed? update deps_test.go")
	}
	for p, pk := range g {
		if slices.Contains(pk.Imports, "remote/daemon/system") && !slices.Contains(rootImporters, p) {
			t.Errorf("%s imports remote/daemon/system; only %q may (the composition root is for the binary and the test daemon)", p, rootImporters)
		}
	}
}

// TestImportRulesCatch checks the checker on a hand-made graph: a forbidden
// edge two hops away, a sub-package of daemon, an unlisted third-party
// module and a test helper in shipped code are each reported.
func TestImportRulesCatch(t *testing.T) {
	mod := func(p string) *struct{ Path string } { return &struct{ Path string }{p} }
	g := graph{
		"remote/web":               {ImportPath: "remote/web", Imports: []string{"remote/api", "remote/web/helper"}},
		"remote/web/helper":        {ImportPath: "remote/web/helper", Imports: []string{"remote/daemon/hub"}},
		"remote/daemon/hub":        {ImportPath: "remote/daemon/hub", Imports: []string{"fmt"}},
		"remote/api":               {ImportPath: "remote/api", Imports: []string{"fmt"}},
		"remote/lxdexec":           {ImportPath: "remote/lxdexec", Imports: []string{"github.com/x/y"}},
		"github.com/x/y":           {ImportPath: "github.com/x/y", Module: mod("github.com/x/y")},
		"remote/provisioning":      {ImportPath: "remote/provisioning", Imports: []string{"remote/internal/testkit"}},
		"remote/internal/testkit":  {ImportPath: "remote/internal/testkit", Imports: []string{"remote/lxdexec"}},
		"remote/client":            {ImportPath: "remote/client", Imports: []string{"remote/api"}},
		"remote/client/clienttest": {ImportPath: "remote/client/clienttest", Imports: []string{"remote/client"}},
		"remote/cmd/remotectl":     {ImportPath: "remote/cmd/remotectl", Imports: []string{"remote/client"}},
		"fmt":                      {ImportPath: "fmt", Standard: true},
		"remote/forge":             {ImportPath: "remote/forge", Imports: []string{"remote/config", "remote/internal/errdefs", "fmt"}},
		"remote/config":            {ImportPath: "remote/config", Imports: []string{"fmt"}},
		"remote/internal/errdefs":  {ImportPath: "remote/internal/errdefs", Imports: []string{"fmt"}},
	}
	got := strings.Join(violations(g, rules), "\n")
	for _, want := range []string{
		"remote/web must not depend on remote/daemon/hub: remote/web → remote/web/helper → remote/daemon/hub",
		"remote/lxdexec imports github.com/x/y (module github.com/x/y), which is not in its allowed list",
		"remote/provisioning must not depend on the test helper remote/internal/testkit",
		"remote/forge imports remote/internal/errdefs, which is not in its allowed list",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations miss %q; got:\n%s", want, got)
		}
	}
	for _, clean := range []string{"remote/client must", "remote/cmd/remotectl must", "remote/client/clienttest must", "remote/api must", "remote/forge imports remote/config"} {
		if strings.Contains(got, clean) {
			t.Errorf("violations wrongly name %q; got:\n%s", clean, got)
		}
	}
}
