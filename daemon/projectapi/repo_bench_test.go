package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/gitserver"
	"remote/lxdexec"
	"remote/providers"
)

// benchRepoToken is the git server's token in the repository benchmarks.
const benchRepoToken = "tok_bench_0123456789abcdef"

// bigRepo creates repository name on git holding 10,000 small files in
// nested directories (d00..d99/s0..s9/f00..f09.txt, a few lines each) and
// returns its URL.
func bigRepo(b *testing.B, git *gitserver.Server, name string) string {
	b.Helper()
	files := make(map[string]string, 10000)
	for d := range 100 {
		for s := range 10 {
			for f := range 10 {
				files[fmt.Sprintf("d%02d/s%d/f%02d.txt", d, s, f)] = fmt.Sprintf("file %d/%d/%d\nline two\nline three\n", d, s, f)
			}
		}
	}
	return git.NewRepo(b, name, files)
}

// needDevImage skips (fails in CI) without the development image in LXD.
func needDevImage(b *testing.B, cl *lxdexec.Client) {
	b.Helper()
	if _, err := cl.ImageAlias(context.Background(), testkit.DevImage); err != nil {
		testkit.Missing(b, "LXD has no image %s (run make image): %v", testkit.DevImage, err)
	}
}

// execDirect runs argv in container's /workspace through LXD's exec API
// (the daemon's own transport) and returns its stdout.
func execDirect(b *testing.B, cl *lxdexec.Client, container string, argv ...string) []byte {
	b.Helper()
	ex, err := cl.Exec(context.Background(), container, lxdexec.ExecRequest{Command: argv, Cwd: "/workspace"})
	if err != nil {
		b.Fatal(err)
	}
	_ = ex.Stdin().Close()
	errc := make(chan []byte, 1)
	go func() { e, _ := io.ReadAll(ex.Stderr()); errc <- e }()
	out, _ := io.ReadAll(ex.Stdout())
	stderr := <-errc
	if code, err := ex.Wait(); err != nil || code != 0 {
		b.Fatalf("%v: exit %d, %v: %s", argv, code, err, stderr)
	}
	return out
}

// BenchmarkChatDiff: GET /v1/chats/{id}/diff of a project cloned from a
// 10,000-file repository after a turn changed 100 files, through the daemon's
// API, the whole chat ("whole") and the changing turn (?turn=, its tree taken
// before the change; the last turn, so against the working tree now: "turn"),
// against `git diff --stat` + `git diff` run in the container directly, through
// LXD's exec API ("direct", the transport the daemon uses) and through `lxc
// exec` ("lxc", as a user would), with the user's index refreshed (git status)
// first; one iteration measures all four in turn (docs/benchmarks.md, "The diff
// of a chat"). Metrics: the four times in ms, whole/direct and turn/direct (goal
// ≤ 1.5, whole < 300 ms).
func BenchmarkChatDiff(b *testing.B) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figure: %v", err)
	}
	cl := testkit.LXD(b)
	needDevImage(b, cl)
	git := gitserver.New(b, benchRepoToken)
	url := bigRepo(b, git, "big")
	e := newProjectEnv(b, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{shellAgent},
		profiles: []string{"default", proxyProfileTB(b, git.Port)}, images: []string{devImage}})
	proj := e.createProjectB(b, api.CreateProjectRequest{Name: uniqueProject("diff"), Image: devImage,
		Repo: &api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}})
	if status, body := e.do("PUT", "/v1/projects/"+proj.Name+"/secrets/GIT_TOKEN", "alice", api.PutSecretRequest{Value: benchRepoToken}); status != http.StatusNoContent && status != http.StatusOK {
		b.Fatalf("put secret: %d %s", status, body)
	}
	chat := e.newChat(b, "claude", proj.Name)
	if evs := e.prompt(b, chat.ID, "alice", "true"); !hasSubtype(evs, api.SubtypeRepoCloned) {
		b.Fatalf("no repo_cloned: %s", dump(evs))
	}
	evs := e.prompt(b, chat.ID, "alice", "for i in $(seq -w 0 99); do echo changed >> d$i/s0/f00.txt; done")
	user, _ := eventOf(evs, api.EventUser, "")
	turnQuery := "?turn=" + strconv.FormatInt(user.Seq, 10)

	daemonDiff := func(query string) time.Duration {
		start := time.Now()
		status, body := e.do("GET", "/v1/chats/"+chat.ID+"/diff"+query, "alice", nil)
		took := time.Since(start)
		var d api.Diff
		if status != http.StatusOK || json.Unmarshal(body, &d) != nil {
			b.Fatalf("diff%s: %d %.300s", query, status, body)
		}
		if len(d.Files) != 100 || d.Truncated || strings.Count(d.Patch, "+changed\n") != 100 {
			b.Fatalf("diff%s: %d files, truncated %v, %d changed lines", query, len(d.Files), d.Truncated, strings.Count(d.Patch, "+changed\n"))
		}
		return took
	}
	direct := func() time.Duration {
		start := time.Now()
		stat := execDirect(b, cl, proj.Container, "git", "diff", "--stat")
		patch := execDirect(b, cl, proj.Container, "git", "diff")
		took := time.Since(start)
		if !strings.Contains(string(stat), "100 files changed") || strings.Count(string(patch), "+changed\n") != 100 {
			b.Fatalf("git diff in the container: %.300s", stat)
		}
		return took
	}
	lxc := func() time.Duration {
		start := time.Now()
		for _, args := range [][]string{{"diff", "--stat"}, {"diff"}} {
			if out, err := exec.Command("lxc", append([]string{"exec", proj.Container, "--cwd", "/workspace", "--", "git"}, args...)...).CombinedOutput(); err != nil {
				b.Fatalf("lxc exec git %v: %v %.300s", args, err, out)
			}
		}
		return time.Since(start)
	}
	// The user's index refreshed, as after any git status: git diff then
	// re-reads only the changed files, not every racily clean one the
	// clone's checkout left.
	if out, err := exec.Command("lxc", "exec", proj.Container, "--cwd", "/workspace", "--", "git", "status", "-s").CombinedOutput(); err != nil {
		b.Fatalf("git status: %v %s", err, out)
	}
	// Warm each path once (page cache, the daemon's connections).
	daemonDiff("")
	daemonDiff(turnQuery)
	direct()
	lxc()
	var whole, turn, dir, lx time.Duration
	b.ResetTimer()
	for range b.N {
		whole += daemonDiff("")
		turn += daemonDiff(turnQuery)
		dir += direct()
		lx += lxc()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(whole.Milliseconds())/n, "whole-ms")
	b.ReportMetric(float64(turn.Milliseconds())/n, "turn-ms")
	b.ReportMetric(float64(dir.Milliseconds())/n, "direct-ms")
	b.ReportMetric(float64(lx.Milliseconds())/n, "lxc-ms")
	b.ReportMetric(float64(whole)/float64(dir), "whole/direct")
	b.ReportMetric(float64(turn)/float64(dir), "turn/direct")
}

func hasSubtype(evs []api.Event, subtype string) bool {
	_, ok := eventOf(evs, api.EventSystem, subtype)
	return ok
}

// BenchmarkCloneToFirstEvent: a new project with the 10,000-file repository,
// from POST /v1/projects (with the token secret and a Claude chat) through the
// first prompt to the run's repo_cloned event ("cloned") and to the CLI's first
// event ("first", the real Claude Code CLI from the store against the fake
// model), on the development image, against `lxc launch remote-dev` + `git
// clone` in it through `lxc exec` ("lxc"); one iteration measures both in turn
// (docs/benchmarks.md, "A new project with that repository"). Each run must
// complete (the CLI reached the model). Metrics: the three times in ms,
// cloned/lxc and first/lxc.
func BenchmarkCloneToFirstEvent(b *testing.B) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figure: %v", err)
	}
	needDevImage(b, testkit.LXD(b))
	git := gitserver.New(b, benchRepoToken)
	url := bigRepo(b, git, "big")
	gitProfile := proxyProfileTB(b, git.Port)
	st := testStore(b, providers.Claude)
	e, model, modelProfile := claudeEnv(b, st, false, false, func(o *projectEnvOpts) {
		o.image, o.images = testkit.DevImage, []string{testkit.DevImage}
		o.profiles = append(o.profiles, gitProfile)
	})
	daemonSide := func() (cloned, first time.Duration) {
		model.Push(fakeanthropic.Text("first"))
		start := time.Now()
		proj := e.createProjectB(b, api.CreateProjectRequest{Name: uniqueProject("clone"), Repo: &api.ProjectRepo{URL: url, TokenSecret: "GIT_TOKEN"}})
		if status, body := e.do("PUT", "/v1/projects/"+proj.Name+"/secrets/GIT_TOKEN", "alice", api.PutSecretRequest{Value: benchRepoToken}); status != http.StatusNoContent && status != http.StatusOK {
			b.Fatalf("put secret: %d %s", status, body)
		}
		chat := e.newChat(b, "claude", proj.Name)
		if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); status != http.StatusAccepted {
			b.Fatalf("prompt: %d %s", status, body)
		}
		deadline := start.Add(3 * time.Minute)
		for first == 0 {
			for _, ev := range e.events(chat.ID) {
				switch {
				case ev.Type == api.EventError:
					b.Fatalf("run failed: %s", dump(e.events(chat.ID)))
				case ev.Type == api.EventSystem && ev.Subtype == api.SubtypeRepoCloneFailed:
					b.Fatalf("clone failed: %s", ev.Data)
				case ev.Type == api.EventSystem && ev.Subtype == api.SubtypeRepoCloned:
					if cloned == 0 {
						cloned = time.Since(start)
					}
					continue
				case ev.Type == api.EventUser || ev.Type == api.EventCheckpoint || ev.Type == api.EventSystem && daemonSubtype(ev.Subtype):
					continue
				}
				first = time.Since(start)
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no event from the CLI: %s", dump(e.events(chat.ID)))
			}
			time.Sleep(2 * time.Millisecond) //nolint:forbidigo // a benchmark's poll: a fixed 2 ms step is the measurement's resolution
		}
		if cloned == 0 {
			b.Fatalf("the CLI's first event came before repo_cloned: %s", dump(e.events(chat.ID)))
		}
		// The run must end well: a CLI that cannot reach the model also
		// emits its first event, then retries for minutes and fails.
		for e.hub.Running(chat.ID) {
			if time.Now().After(deadline) {
				b.Fatalf("the run did not end: %s", dump(e.events(chat.ID)))
			}
			time.Sleep(10 * time.Millisecond) //nolint:forbidigo // a benchmark's poll between measured steps
		}
		if evs := e.events(chat.ID); hasType(evs, api.EventError) || !hasType(evs, api.EventComplete) {
			b.Fatalf("run did not complete: %s", dump(evs))
		}
		_ = e.lxd.ForceDeleteInstance(context.Background(), proj.Container)
		return cloned, first
	}
	lxcSide := func() time.Duration {
		name := testkit.ContainerName("lxcclone")
		cloneURL := strings.Replace(url, "http://", "http://x-access-token:"+benchRepoToken+"@", 1)
		start := time.Now()
		if out, err := exec.Command("lxc", "launch", testkit.DevImage, name, "-p", "default", "-p", modelProfile, "-p", gitProfile).CombinedOutput(); err != nil {
			b.Fatalf("lxc launch: %v %s", err, out)
		}
		out, err := exec.Command("lxc", "exec", name, "--", "git", "clone", "-q", cloneURL, "/workspace").CombinedOutput()
		took := time.Since(start)
		_ = exec.Command("lxc", "delete", "--force", name).Run()
		if err != nil {
			b.Fatalf("git clone in the container: %v %s", err, out)
		}
		return took
	}
	daemonSide()
	lxcSide()
	var cloned, first, lxc time.Duration
	b.ResetTimer()
	for range b.N {
		c, f := daemonSide()
		cloned += c
		first += f
		lxc += lxcSide()
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(cloned.Milliseconds())/n, "cloned-ms")
	b.ReportMetric(float64(first.Milliseconds())/n, "first-ms")
	b.ReportMetric(float64(lxc.Milliseconds())/n, "lxc-ms")
	b.ReportMetric(float64(cloned)/float64(lxc), "cloned/lxc")
	b.ReportMetric(float64(first)/float64(lxc), "first/lxc")
}

// daemonSubtype reports whether a system event's subtype is the daemon's
// own (preparation, repository, checkpoint), not the CLI's.
func daemonSubtype(s string) bool {
	switch s {
	case "container_starting", "container_preparing", api.SubtypeRepoCloned, api.SubtypeTurnTree, api.SubtypeCheckpointFailed:
		return true
	}
	return false
}
