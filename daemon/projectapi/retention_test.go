package projectapi

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
	"remote/provisioning"
	"remote/provisioning/checkpoint"
	"remote/provisioning/lxdconn"
)

// gatedListing is the preparer's LXD whose snapshot listing (what
// retention needs) waits until gate is closed.
type gatedListing struct {
	*lxdconn.Conn
	gate chan struct{}
}

func (g gatedListing) Snapshots(ctx context.Context, instance string) ([]lxdexec.Snapshot, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Conn.Snapshots(ctx, instance)
}

// TestCheckpointRetentionOffTurnPath: retention (listing and deleting old
// checkpoints) never delays a turn: with LXD's snapshot listing held, two
// turns run to completion, each with its checkpoint event; once listing
// answers, GET checkpoints shows retention applied (keep 1: turn 2's).
// On the old code the first turn waited for the listing.
func TestCheckpointRetentionOffTurnPath(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open)
	e := newProjectEnv(t, projectEnvOpts{
		checkpointKeep: 1,
		prepLXD:        func(c *lxdconn.Conn) provisioning.LXD { return gatedListing{c, gate} },
		providers:      []func(providers.AdapterConfig) providers.Provider{fileAgent},
	})
	proj, chat := newFileChat(t, e, api.CreateProjectRequest{Name: uniqueProject("ckret")})
	e.startProject(t, proj.Name)
	var seqs []int64
	for _, turn := range []string{"t1", "t2"} {
		before := len(e.events(chat.ID))
		if status, body := e.do("POST", "/v1/chats/"+chat.ID+"/prompt", "alice", api.PromptRequest{Text: turn}); status != http.StatusAccepted {
			t.Fatalf("prompt: %d %s", status, body)
		}
		if err := testkit.Poll(2*time.Minute, func() bool { return !e.hub.Running(chat.ID) }); err != nil {
			open()
			t.Fatalf("turn %s did not end while LXD's snapshot listing was held: it waits for retention", turn)
		}
		evs := e.events(chat.ID)[before:]
		if !hasType(evs, api.EventCheckpoint) || !hasType(evs, api.EventComplete) {
			t.Fatalf("turn %s events %v", turn, types(evs))
		}
		seqs = append(seqs, evs[0].Seq)
	}
	open()
	list := e.checkpointList(t, proj.Name)
	if len(list) != 1 || list[0].Name != checkpoint.Name(chat.ID, seqs[1]) {
		t.Fatalf("checkpoints with keep 1 after two turns: %+v, want turn 2's only", list)
	}
}
