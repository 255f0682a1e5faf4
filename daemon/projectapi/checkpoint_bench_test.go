package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning/checkpoint"
)

// benchData is the project content of a checkpoint or fork benchmark:
// the busybox image alone, or 1 GiB more of files (8 × 128 MiB from
// /dev/urandom, written once in the set-up, so a dir copy cannot skip
// them and btrfs cannot share them with the image).
var benchData = []struct {
	name  string
	files int // of 128 MiB
}{{"busybox", 0}, {"1GiB", 8}}

// fillProject writes n files of 128 MiB into /root/data of the running
// container.
func fillProject(b *testing.B, e *projectEnv, container string, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`mkdir -p /root/data && i=0; while [ $i -lt %d ]; do dd if=/dev/urandom of=/root/data/f$i bs=1M count=128 2>/dev/null || exit 1; i=$((i+1)); done; sync; du -sm /root/data`, n)
	ex, err := e.lxd.Exec(ctx, container, lxdexec.ExecRequest{Command: []string{"sh", "-c", script}})
	if err != nil {
		b.Fatal(err)
	}
	_ = ex.Stdin().Close()
	go func() { _, _ = io.Copy(io.Discard, ex.Stderr()) }()
	out, _ := io.ReadAll(ex.Stdout())
	if code, err := ex.Wait(); err != nil || code != 0 {
		b.Fatalf("fill %s: exit %d, %v: %s", container, code, err, out)
	}
	b.Logf("%s: %s MiB of files", container, strings.TrimSpace(string(out)))
}

// benchEachPool runs bench for each storage path and project content as
// sub-benchmarks "<driver>/<content>" (a missing btrfs pool fails in CI).
func benchEachPool(b *testing.B, bench func(b *testing.B, pool testkit.Pool, files int)) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figures: %v", err)
	}
	for _, pool := range testkit.Pools() {
		for _, d := range benchData {
			b.Run(pool.Driver+"/"+d.name, func(b *testing.B) {
				testkit.RequirePool(b, pool)
				bench(b, pool, d.files)
			})
		}
	}
}

// reportSideBySide reports the mean of each side per operation and their
// ratio (remote/lxc), both timed in this run.
func reportSideBySide(b *testing.B, n int, remote, lxc time.Duration) {
	if n == 0 {
		return
	}
	r := float64(remote.Milliseconds()) / float64(n)
	l := float64(lxc.Milliseconds()) / float64(n)
	b.ReportMetric(r, "remote-ms/op")
	b.ReportMetric(l, "lxc-ms/op")
	if l > 0 {
		b.ReportMetric(r/l, "ratio")
	}
}

// BenchmarkCheckpoint is the per-turn checkpoint cost on each storage pool
// and project size: "remote" is the preparer's turn path (reconcile a
// running container, snapshot through LXD's API; retention is pruned off
// the turn path, keep 2 so it deletes every turn as a full project's
// does), "lxc" is `lxc snapshot` of the same container, timed alternately
// in the same loop (docs/benchmarks.md).
func BenchmarkCheckpoint(b *testing.B) {
	benchEachPool(b, func(b *testing.B, pool testkit.Pool, files int) {
		e := newProjectEnv(b, projectEnvOpts{checkpointKeep: 2})
		p := e.createProjectB(b, api.CreateProjectRequest{Name: uniqueProject("benchcp"), Pool: pool.Name})
		if status, body := e.do("POST", "/v1/projects/"+p.Name+"/start", "alice", nil); status != http.StatusOK {
			b.Fatalf("start: %d %s", status, body)
		}
		fillProject(b, e, p.Container, files)
		ctx := context.Background()
		var remote, lxc time.Duration
		var seq int64
		n := 0
		for b.Loop() {
			n++
			seq++
			var ferr error
			tctx := checkpoint.WithTurn(ctx, checkpoint.Turn{Chat: "0123456789ab", Seq: seq,
				Done: func(_, _ string, err error) { ferr = err }})
			start := time.Now()
			if _, err := e.prep.Prepare(tctx, providers.PrepareRequest{Provider: providers.Claude, ProjectID: p.Name, ProjectUID: p.ID}, nil); err != nil || ferr != nil {
				b.Fatal(err, ferr)
			}
			remote += time.Since(start)
			// Retention runs after the turn started; it is not in either
			// side's time.
			b.StopTimer()
			if err := e.prep.WaitRetention(ctx, p); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			name := fmt.Sprintf("lxc-bench-%d", seq)
			start = time.Now()
			testkit.BehindTheBack(b, "lxc snapshot", lxcCommand("snapshot", p.Container, name))
			lxc += time.Since(start)
			b.StopTimer()
			testkit.BehindTheBack(b, "lxc delete snapshot", lxcCommand("delete", p.Container+"/"+name))
			b.StartTimer()
		}
		reportSideBySide(b, n, remote, lxc)
	})
}

// BenchmarkForkWithContainer is a fork with the container on each storage
// pool and project size: "remote" is POST /v1/chats/{id}/fork {atSeq,
// withContainer} (new project, history and an LXD copy of the
// checkpoint), "lxc" is `lxc copy` of the same snapshot, timed alternately
// in the same loop. The copies are deleted outside the timer.
func BenchmarkForkWithContainer(b *testing.B) {
	benchEachPool(b, func(b *testing.B, pool testkit.Pool, files int) {
		e := newProjectEnv(b, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
		proj := e.createProjectB(b, api.CreateProjectRequest{Name: uniqueProject("benchfork"), Pool: pool.Name})
		if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
			b.Fatalf("start: %d %s", status, body)
		}
		fillProject(b, e, proj.Container, files)
		status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: proj.Name})
		var chat api.Chat
		if status != http.StatusCreated || json.Unmarshal(body, &chat) != nil {
			b.Fatalf("chat: %d %s", status, body)
		}
		if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "t1"}); status != http.StatusAccepted {
			b.Fatalf("prompt: %d %s", status, body)
		}
		testkit.Eventually(b, 3*time.Minute, func() bool { return !e.hub.Running(chat.ID) }, "chat %s idle", chat.ID)
		cp := checkpoint.Name(chat.ID, 1)
		ctx := context.Background()
		var remote, lxc time.Duration
		n := 0
		for b.Loop() {
			n++
			start := time.Now()
			status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": 1, "withContainer": true})
			remote += time.Since(start)
			var fork api.Chat
			if status != http.StatusCreated || json.Unmarshal(body, &fork) != nil {
				b.Fatalf("fork: %d %s", status, body)
			}
			name := testkit.ContainerName("lxccopy")
			start = time.Now()
			testkit.BehindTheBack(b, "lxc copy", lxcCommand("copy", proj.Container+"/"+cp, name))
			lxc += time.Since(start)
			b.StopTimer()
			np, err := e.routes.o.Store.Project(fork.Project)
			if err != nil {
				b.Fatal(err)
			}
			for _, c := range []string{np.Container, name} {
				if err := e.lxd.ForceDeleteInstance(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			b.StartTimer()
		}
		reportSideBySide(b, n, remote, lxc)
	})
}

func (e *projectEnv) createProjectB(b *testing.B, req api.CreateProjectRequest) api.Project {
	b.Helper()
	status, body := e.do("POST", "/v1/projects", "alice", req)
	var p api.Project
	if status != http.StatusCreated || json.Unmarshal(body, &p) != nil {
		b.Fatalf("create project: %d %s", status, body)
	}
	testkit.CleanupContainer(b, testkit.LXD(b), p.Container)
	return p
}
