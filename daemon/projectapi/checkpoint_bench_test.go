package projectapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/providers"
	"remote/provisioning"
)

// BenchmarkCheckpoint is the per-turn checkpoint cost: "remote" is the
// preparer's turn path (reconcile a running container, snapshot through
// LXD's API, prune to checkpoint_keep), "lxc" is `lxc snapshot` of the same
// container in the same run (docs/benchmarks.md).
func BenchmarkCheckpoint(b *testing.B) {
	e, p := benchEnv(b, projectEnvOpts{})
	ctx := context.Background()
	var seq, lseq int64 // b.Run calls each body more than once: names stay unique
	b.Run("remote", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var ferr error
			seq++
			tctx := provisioning.WithTurn(ctx, provisioning.Turn{Chat: "0123456789ab", Seq: seq,
				Done: func(_, _ string, err error) { ferr = err }})
			if _, err := e.prep.Prepare(tctx, providers.PrepareRequest{Provider: providers.Claude, ProjectID: p.Name, ProjectUID: p.ID}, nil); err != nil || ferr != nil {
				b.Fatal(err, ferr)
			}
		}
	})
	b.Run("lxc", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			lseq++
			name := fmt.Sprintf("lxc-bench-%d", lseq)
			testkit.BehindTheBack(b, "lxc snapshot", lxcCommand("snapshot", p.Container, name))
			b.StopTimer()
			testkit.BehindTheBack(b, "lxc delete snapshot", lxcCommand("delete", p.Container+"/"+name))
			b.StartTimer()
		}
	})
}

// BenchmarkForkWithContainer is a fork with the container: "remote" is
// POST /v1/chats/{id}/fork {atSeq, withContainer} (new project, history and
// an LXD copy of the checkpoint), "lxc" is `lxc copy` of the same snapshot.
func BenchmarkForkWithContainer(b *testing.B) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figures: %v", err)
	}
	e := newProjectEnv(b, projectEnvOpts{providers: []func(providers.AdapterConfig) providers.Provider{fileAgent}})
	proj := e.createProjectB(b, uniqueProject("benchfork"))
	status, body := e.do("POST", "/v1/chats", "alice", api.CreateChatRequest{Provider: "claude", Project: proj.Name})
	var chat api.Chat
	if status != http.StatusCreated || json.Unmarshal(body, &chat) != nil {
		b.Fatalf("chat: %d %s", status, body)
	}
	if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: "t1"}); status != http.StatusAccepted {
		b.Fatalf("prompt: %d %s", status, body)
	}
	for e.srv.Hub().Running(chat.ID) {
		time.Sleep(20 * time.Millisecond)
	}
	cp := provisioning.CheckpointName(chat.ID, 1)
	b.Run("remote", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			status, body := e.do("POST", "/v1/chats/"+chat.ID+"/fork", "alice", map[string]any{"atSeq": 1, "withContainer": true})
			var fork api.Chat
			if status != http.StatusCreated || json.Unmarshal(body, &fork) != nil {
				b.Fatalf("fork: %d %s", status, body)
			}
			b.StopTimer()
			np, err := e.routes.o.Store.Project(fork.Project)
			if err != nil {
				b.Fatal(err)
			}
			if err := e.lxd.ForceDeleteInstance(context.Background(), np.Container); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
	b.Run("lxc", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			name := testkit.ContainerName("lxccopy")
			testkit.BehindTheBack(b, "lxc copy", lxcCommand("copy", proj.Container+"/"+cp, name))
			b.StopTimer()
			if err := e.lxd.ForceDeleteInstance(context.Background(), name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
	})
}

func (e *projectEnv) createProjectB(b *testing.B, name string) api.Project {
	b.Helper()
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: name})
	var p api.Project
	if status != http.StatusCreated || json.Unmarshal(body, &p) != nil {
		b.Fatalf("create project: %d %s", status, body)
	}
	testkit.CleanupContainer(b, testkit.LXD(b), p.Container)
	return p
}
