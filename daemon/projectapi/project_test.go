package projectapi

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/config"
	"remote/daemon"
	"remote/daemon/egress"
	"remote/daemon/hostapi"
	"remote/daemon/prompt"
	"remote/daemon/repoapi"
	"remote/forge"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/providers/containerfs"
	"remote/providers/runner"
	"remote/provisioning"
	"remote/provisioning/gitrepo"
	"remote/provisioning/lxdconn"
	"remote/provisioning/lxdimage"
	"remote/provisioning/reconcile"
	"remote/provisioning/warm"
)

// projectEnv is a test server with the project routes over real LXD.
type projectEnv struct {
	*testServer
	lxd    *lxdexec.Client
	conn   *lxdconn.Conn
	prep   *provisioning.Preparer
	rec    *reconcile.Reconciler
	routes *Projects
	repos  *repoapi.Routes
	logs   *syncBuffer
	warm   *warm.Pool
}

// syncBuffer is a goroutine-safe log sink, so tests can grep every line.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type projectEnvOpts struct {
	providers []func(ports providers.AdapterConfig) providers.Provider
	steps     *provisioning.StepsOptions
	profiles  []string
	lxd       *lxdexec.Client // nil: testkit.LXD
	resync    time.Duration   // reconciler resync interval; 0: default
	// stepsLXD wraps the LXD the provisioning steps use (fault injection).
	stepsLXD func(provisioning.LXD) provisioning.LXD
	// prepLXD wraps the LXD the preparer uses (fault injection);
	// checkpointKeep is its checkpoints kept per project.
	prepLXD        func(*lxdconn.Conn) provisioning.LXD
	checkpointKeep int
	// checkpointExpiry is the LXD expiry of its checkpoints (0: none).
	checkpointExpiry time.Duration
	defaultPool      string // [projects] pool
	// pools is [projects] allowed_pools (nil: the test pools, dir and btrfs).
	pools []string
	// previewDir holds the port previews' sockets ("" none).
	previewDir string
	skillsDir  string // the daemon's [projects] skills_dir ("" none)
	// image is the default image ([lxd] image; "": the busybox test
	// image); maxImageBytes bounds POST /v1/images (0: the default).
	image         string
	maxImageBytes int64
	// images is [projects] allowed_images (nil: the default image only).
	images []string
	// maxDiffBytes is [projects] max_diff_bytes (0: the default).
	maxDiffBytes int
	// maxUpload is [projects] max_upload_bytes; fileUID and fileGID own
	// uploads ([projects] container_uid, container_gid).
	maxUpload        int64
	fileUID, fileGID int
	// fileOpsPerUser and fileOpsPerProject bound file requests in flight
	// (0: the defaults).
	fileOpsPerUser, fileOpsPerProject int
	// pullOpen is ProjectsOptions.PullOpenTimeout (0: the default).
	pullOpen time.Duration
	// imageServers are [lxd.image_servers] (nil: none).
	imageServers map[string]lxdimage.Server
	// forges is [forges] (nil: none configured).
	forges map[string]config.Forge
	// warm is [projects] warm; warmPrefix names the pool's containers
	// ("": per test process, removed at the end).
	warm       int
	warmPrefix string
	// limits are [projects.limits], the caps (setCaps changes them as an
	// operator's restart with a new config does).
	limits api.ProjectLimits
	// network gives the daemon an egress proxy of this configuration
	// ([projects.network]; nil: none, every project open).
	network *egress.Config
	// netResolver and netPublic are the egress proxy's DNS and idea of a
	// public address (nil: the system's; tests name a stand-in for the
	// internet).
	netResolver egress.Resolver
	netPublic   func(netip.Addr) bool
}

func newProjectEnv(t testing.TB, o projectEnvOpts) *projectEnv {
	t.Helper()
	cl := o.lxd
	if cl == nil {
		cl = testkit.LXD(t)
	}
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: logs})
	e := &projectEnv{lxd: cl, conn: lxdconn.NewConn(cl), logs: logs}
	ts := newTestServer(t, nil, func(opts *daemon.Options) {
		opts.Logger = log
		opts.SkillsDir = o.skillsDir
		st := opts.Store.(interface {
			ProjectStore
			prompt.Store
		})
		var deps provisioning.Dependencies
		if o.steps != nil {
			so := *o.steps
			so.LXD, so.Logger = e.conn, log.Named("steps")
			if o.stepsLXD != nil {
				so.LXD = o.stepsLXD(e.conn)
			}
			deps, _ = provisioning.NewDependencies(so)
		}
		var prepLXD provisioning.LXD = e.conn
		if o.prepLXD != nil {
			prepLXD = o.prepLXD(e.conn)
		}
		var egressSrv *egress.Server
		var policy *egress.Compiled
		if o.network != nil {
			var err error
			if policy, err = egress.Compile(*o.network); err != nil {
				t.Fatal(err)
			}
			dir, err := os.MkdirTemp("", "egr")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			egressSrv, err = egress.New(egress.Options{Dir: dir, Policy: policy, Resolver: o.netResolver, Public: o.netPublic,
				Blocked: func(p api.Project, host string, port int, method, reason string) {
					if e.routes != nil {
						e.routes.EgressBlocked(p, host, port, method, reason)
					}
				}, Lookup: func(id string) (api.Project, error) {
					all, err := st.Projects()
					for _, p := range all {
						if p.ID == id {
							return p, nil
						}
					}
					return api.Project{}, fmt.Errorf("no project %s: %v", id, err)
				}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = egressSrv.Close() })
		}
		popts := provisioning.Options{
			LXD: prepLXD, CheckpointKeep: o.checkpointKeep, CheckpointExpiry: o.checkpointExpiry, Projects: st, Secrets: provisioning.SecretSourceFunc(StoreSecrets(st)),
			Image: cmp.Or(o.image, testkit.TestImage), ImageServers: lxdimage.NewServers(o.imageServers), Profiles: o.profiles, Deps: deps, Logger: log.Named("prepare"),
			CredentialSyncTimeout: 3 * time.Second, PreviewDir: o.previewDir, EnvLogDir: t.TempDir(),
			Checkouts: func(id string) (gitrepo.Checkout, error) { return e.repos.Checkout(id) },
		}
		if egressSrv != nil {
			popts.Egress = egressSrv
		}
		prep, err := provisioning.New(popts)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := reconcile.New(reconcile.Options{Start: func(ctx context.Context, p api.Project) error { _, err := prep.Start(ctx, p); return err },
			MarkerKey: provisioning.MarkerKey, NameKey: provisioning.NameKey, Projects: st, Lister: e.conn, Events: e.conn, Logger: log, Resync: o.resync})
		if err != nil {
			t.Fatal(err)
		}
		pools := o.pools
		if pools == nil {
			pools = []string{testkit.DirPool, testkit.BtrfsPool}
		}
		e.warm = startWarm(t, e.conn, prep, o, log)
		// The run hub and the prompt service, built before the routes that
		// are handed them (as system.New does).
		opts.Projects = ProjectChatCheck{Store: st}
		withHub(opts)
		routes, err := NewProjects(ProjectsOptions{Store: st, Preparer: prep, Exec: e.conn, Logger: log, Chats: st, Hub: opts.Hub, DefaultPool: o.defaultPool, Pools: pools, Images: o.images, Limits: o.limits,
			FS:                &containerfs.ContainerFiles{LXD: e.conn, Shim: &runner.ShimConfig{Binary: testkit.ShimBinary(t)}},
			MaxFileOpsPerUser: o.fileOpsPerUser, MaxFileOpsPerProject: o.fileOpsPerProject, PullOpenTimeout: o.pullOpen,
			MaxUploadBytes: o.maxUpload, FileUID: o.fileUID, FileGID: o.fileGID, Warm: e.warm, Network: policy})
		if err != nil {
			t.Fatal(err)
		}
		repos, err := repoapi.New(repoapi.Options{Store: st, Starter: prep, Exec: e.conn, Chats: st, Hub: opts.Hub, Prompts: opts.Service, MaxPatchBytes: o.maxDiffBytes, Logger: log.Named("repo"),
			Forge: forgeFor(o.forges), Hooks: hooksFor(o.forges), DefaultProvider: "claude"})
		if err != nil {
			t.Fatal(err)
		}
		e.repos = repos
		opts.RouteProviders = append(opts.RouteProviders, repos)
		e.prep, e.rec, e.routes = prep, rec, routes
		opts.RouteProviders = append(opts.RouteProviders, routes,
			&hostapi.ImageRoutes{LXD: e.conn, Default: prep.DefaultImage(), Allowed: o.images, MaxBytes: o.maxImageBytes, Logger: log.Named("images")})
		opts.ContainerForker = routes
		if len(o.providers) > 0 {
			ports := providers.AdapterConfig{Containers: &runner.LXDLauncher{Client: cl}, Preparer: prep, Logger: log}
			m := map[providers.ProviderID]providers.Provider{}
			for _, mk := range o.providers {
				p := mk(ports)
				m[p.ID()] = p
			}
			opts.Registry.Set(m, nil, nil)
		}
	})
	e.testServer = ts
	return e
}

// createProject creates a project and force-deletes its container at the
// end of the test.
func (e *projectEnv) createProject(t *testing.T, user string, req api.CreateProjectRequest) api.Project {
	t.Helper()
	status, body := e.do("POST", "/v1/projects", user, req)
	if status != http.StatusCreated {
		t.Fatalf("create project: %d %s", status, body)
	}
	var p api.Project
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	// A direct client: the env's own may reach LXD through a proxy the
	// test has taken down by the time cleanups run.
	direct := testkit.LXD(t)
	testkit.CleanupContainer(t, direct, p.Container)
	return p
}

// uniqueProject returns a project name that no parallel run uses.
func uniqueProject(prefix string) string {
	return strings.TrimPrefix(testkit.ContainerName(prefix), "t-")
}

// execFrames posts an exec and returns the decoded frames.
func (e *projectEnv) execFrames(t *testing.T, project, user string, req api.ExecRequest) []api.ExecFrame {
	t.Helper()
	status, body := e.do("POST", "/v1/projects/"+project+"/exec", user, req)
	if status != http.StatusOK {
		t.Fatalf("exec: %d %s", status, body)
	}
	var frames []api.ExecFrame
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var f api.ExecFrame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("frame %q: %v", sc.Text(), err)
		}
		frames = append(frames, f)
	}
	return frames
}

func joinStream(frames []api.ExecFrame, stream string) string {
	var b strings.Builder
	for _, f := range frames {
		if f.Stream == stream {
			b.Write(f.Data)
		}
	}
	return b.String()
}

func exitCode(t *testing.T, frames []api.ExecFrame) int {
	t.Helper()
	if len(frames) == 0 || frames[len(frames)-1].ExitCode == nil {
		t.Fatalf("last frame carries no exit code: %+v", frames)
	}
	return *frames[len(frames)-1].ExitCode
}

func TestProjectRoutesRealLXD(t *testing.T) {
	e := newProjectEnv(t, projectEnvOpts{})
	name := uniqueProject("routes")
	p := e.createProject(t, "alice", api.CreateProjectRequest{Name: name})
	const secretValue = "tok-Zq9-never-leaks"

	t.Run("create validates input", func(t *testing.T) {
		for _, tc := range []struct {
			body any
			code int
		}{
			{api.CreateProjectRequest{Name: "Bad_Name"}, 400},
			{`{"name":"x1","bogus":1}`, 400},
			{api.CreateProjectRequest{Name: "x2", Ports: []int{0}}, 400},
			{api.CreateProjectRequest{Name: "x3", Provider: "nope"}, 400},
			{api.CreateProjectRequest{Name: "x4", Credentials: "host"}, 400},
			{api.CreateProjectRequest{Name: name}, 409},
		} {
			if status, body := e.do("POST", "/v1/projects", "alice", tc.body); status != tc.code {
				t.Errorf("body %v: %d %s, want %d", tc.body, status, body, tc.code)
			}
		}
	})

	t.Run("owner sees it, another user gets 404", func(t *testing.T) {
		if status, _ := e.do("GET", "/v1/projects/"+name, "alice", nil); status != 200 {
			t.Fatalf("owner: %d", status)
		}
		if status, body := e.do("GET", "/v1/projects/"+name, "bob", nil); status != 404 || errorCode(t, body) != api.CodeNotFound {
			t.Fatalf("other user: %d %s", status, body)
		}
		_, body := e.do("GET", "/v1/projects", "bob", nil)
		if strings.Contains(string(body), name) {
			t.Fatalf("bob lists alice's project: %s", body)
		}
	})

	t.Run("error messages name the project once", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			body         any
			status       int
			want         string
		}{
			{"GET", "/v1/projects/none", nil, 404, `project "none": not found`},
			{"POST", "/v1/projects", api.CreateProjectRequest{Name: name}, 409, `create project "` + name + `": already exists`},
			{"DELETE", "/v1/projects/" + name + "/secrets/NOPE", nil, 404, `delete secret: secret "NOPE" of project "` + name + `": not found`},
		} {
			status, body := e.do(tc.method, tc.path, "alice", tc.body)
			var got api.ErrorResponse
			if err := json.Unmarshal(body, &got); err != nil || status != tc.status || got.Error.Message != tc.want {
				t.Errorf("%s %s: %d %s, want %d message %q", tc.method, tc.path, status, body, tc.status, tc.want)
			}
		}
	})

	t.Run("start creates and runs the container", func(t *testing.T) {
		status, body := e.do("POST", "/v1/projects/"+name+"/start", "alice", nil)
		if status != 200 || !strings.Contains(string(body), `"status":"running"`) {
			t.Fatalf("start: %d %s", status, body)
		}
		inst, _, err := e.lxd.Instance(context.Background(), p.Container)
		if err != nil || inst.Status != "Running" {
			t.Fatalf("container %v %v", inst, err)
		}
	})

	t.Run("secrets are stored, listed without values, deleted", func(t *testing.T) {
		if status, body := e.do("PUT", "/v1/projects/"+name+"/secrets/1BAD", "alice", api.PutSecretRequest{Value: "x"}); status != 400 {
			t.Fatalf("bad key: %d %s", status, body)
		}
		if status, body := e.do("PUT", "/v1/projects/"+name+"/secrets/API_TOKEN", "alice", api.PutSecretRequest{Value: secretValue}); status != 204 {
			t.Fatalf("put: %d %s", status, body)
		}
		status, body := e.do("GET", "/v1/projects/"+name+"/secrets", "alice", nil)
		if status != 200 || !strings.Contains(string(body), "API_TOKEN") || strings.Contains(string(body), secretValue) {
			t.Fatalf("list: %d %s", status, body)
		}
		if status, _ := e.do("DELETE", "/v1/projects/"+name+"/secrets/NOPE", "alice", nil); status != 404 {
			t.Fatalf("delete missing: %d", status)
		}
	})

	t.Run("exec streams output then the exit code", func(t *testing.T) {
		frames := e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
		if joinStream(frames, "stdout") != "out\n" || joinStream(frames, "stderr") != "err\n" || exitCode(t, frames) != 3 {
			t.Fatalf("frames %+v", frames)
		}
		frames = e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"cat"}, Stdin: "from stdin"})
		if joinStream(frames, "stdout") != "from stdin" || exitCode(t, frames) != 0 {
			t.Fatalf("stdin frames %+v", frames)
		}
		frames = e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"no-such-command"}})
		if exitCode(t, frames) != 127 {
			t.Fatalf("missing command frames %+v", frames)
		}
	})

	t.Run("exec loses and reorders nothing", func(t *testing.T) {
		frames := e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"seq", "1", "200000"}})
		out := joinStream(frames, "stdout")
		var want strings.Builder
		for i := 1; i <= 200000; i++ {
			want.WriteString(strconv.Itoa(i))
			want.WriteByte('\n')
		}
		if out != want.String() || exitCode(t, frames) != 0 {
			t.Fatalf("seq output: %d bytes, want %d", len(out), want.Len())
		}
	})

	t.Run("client disconnect cancels the exec", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		body, _ := json.Marshal(api.ExecRequest{Command: []string{"sh", "-c", "echo started; exec sleep 4242"}})
		req, _ := http.NewRequestWithContext(ctx, "POST", "http://remoted/v1/projects/"+name+"/exec", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderUser, "alice")
		resp, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if !strings.Contains(line, "stdout") {
			t.Fatalf("first frame %q", line)
		}
		cancel()
		resp.Body.Close()
		testkit.Eventually(t, 90*time.Second, func() bool {
			frames := e.execFrames(t, name, "alice", api.ExecRequest{Command: []string{"ps"}})
			return !strings.Contains(joinStream(frames, "stdout"), "sleep 4242")
		}, "sleep 4242 gone")
	})

	t.Run("terminal is a pty over a websocket", func(t *testing.T) {
		ws, resp, err := e.dialWS("/v1/projects/"+name+"/terminal?cols=100&rows=30", "alice")
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		defer ws.Close()
		send := func(s string) {
			if err := ws.WriteMessage(websocket.BinaryMessage, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		// readUntil reads until want appears after what earlier calls
		// matched: one frame may carry several awaited strings ("30 100"
		// and "tty-42" often come together; CI once waited 90 s for a
		// "tty-42" a frame already read had carried).
		var out string
		readUntil := func(want string) {
			t.Helper()
			_ = ws.SetReadDeadline(time.Now().Add(90 * time.Second))
			for !strings.Contains(out, want) {
				_, data, err := ws.ReadMessage()
				if err != nil {
					t.Fatalf("read until %q (unmatched output %q): %v", want, out, err)
				}
				out += string(data)
			}
			out = out[strings.Index(out, want)+len(want):]
		}
		readUntil("# ") // the prompt: type once the shell listens, as a person would
		send("stty size; echo tty-$((6*7))\n")
		readUntil("30 100")
		readUntil("tty-42")
		if err := ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":120,"rows":40}`)); err != nil {
			t.Fatal(err)
		}
		send("stty size\n")
		readUntil("40 120")
		send("exit 0\n")
		_ = ws.SetReadDeadline(time.Now().Add(90 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
					t.Fatalf("close: %v", err)
				}
				break
			}
		}
	})

	t.Run("stop, then delete with purge removes the container", func(t *testing.T) {
		if status, body := e.do("POST", "/v1/projects/"+name+"/stop", "alice", nil); status != 200 || !strings.Contains(string(body), `"status":"stopped"`) {
			t.Fatalf("stop: %d %s", status, body)
		}
		if status, _ := e.do("DELETE", "/v1/projects/"+name+"?purge=maybe", "alice", nil); status != 400 {
			t.Fatalf("bad purge: %d", status)
		}
		if status, body := e.do("DELETE", "/v1/projects/"+name+"?purge=true", "alice", nil); status != 204 {
			t.Fatalf("delete: %d %s", status, body)
		}
		if _, _, err := e.lxd.Instance(context.Background(), p.Container); !errorsIsNotFound(err) {
			t.Fatalf("container still there: %v", err)
		}
		if status, _ := e.do("GET", "/v1/projects/"+name, "alice", nil); status != 404 {
			t.Fatalf("project still there: %d", status)
		}
	})

	if strings.Contains(e.logs.String(), secretValue) {
		t.Fatal("a secret value reached the logs")
	}
}

func errorsIsNotFound(err error) bool { return errors.Is(err, lxdexec.ErrNotFound) }

// forgeFor is cmd/remoted's adapter of package forge over [forges] to
// the repository routes.
func forgeFor(forges map[string]config.Forge) func(repoURL string) (repoapi.Opener, error) {
	return func(repoURL string) (repoapi.Opener, error) {
		f, repo, err := forge.ForRepo(forges, repoURL)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, token string, pr repoapi.PullRequest) (string, int, error) {
			res, err := f.OpenPullRequest(ctx, token, forge.PullRequest{Repo: repo, Head: pr.Head, Base: pr.Base, Title: pr.Title, Body: pr.Body})
			return res.URL, res.Number, err
		}, nil
	}
}
