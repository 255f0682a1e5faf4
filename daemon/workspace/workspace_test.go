package workspace

import (
	"encoding/json"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/daemon/store"
)

// A record without an owner (a project stored before owners existed,
// which every user sees in the snapshot) fans out to every workspace
// subscriber; an owned record only to its owner's.
func TestFanOutOfRecordsWithoutOwner(t *testing.T) {
	w := New(hclog.NewNullLogger(), func(string) (api.Chat, error) { return api.Chat{}, nil }, func(string) bool { return false })
	alice, bob := w.Subscribe("alice"), w.Subscribe("bob")
	next := func(s *Sub) (api.WorkspaceMessage, bool) {
		select {
		case b := <-s.C():
			var m api.WorkspaceMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			return m, true
		default:
			return api.WorkspaceMessage{}, false
		}
	}
	w.OnStoreChange(store.Change{Project: &api.Project{Name: "legacy", ID: "p1"}})
	w.OnStoreChange(store.Change{Project: &api.Project{Name: "legacy", ID: "p1"}, Deleted: true})
	for name, s := range map[string]*Sub{"alice": alice, "bob": bob} {
		for _, want := range []string{api.ProjectUpsert, api.ProjectDelete} {
			if m, ok := next(s); !ok || m.Type != want {
				t.Errorf("%s got %+v (%v), want %s of the ownerless project", name, m, ok, want)
			}
		}
	}
	w.OnStoreChange(store.Change{Project: &api.Project{Name: "mine", ID: "p2", Owner: "alice"}})
	if m, ok := next(alice); !ok || m.Type != api.ProjectUpsert {
		t.Errorf("alice got %+v (%v), want her project's upsert", m, ok)
	}
	if m, ok := next(bob); ok {
		t.Errorf("bob got alice's project: %+v", m)
	}
}
