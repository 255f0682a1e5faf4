package store

import (
	"encoding/json"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

func TestProjectIDs(t *testing.T) {
	s, _ := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Project("web")
	if err != nil {
		t.Fatal(err)
	}
	if !ValidProjectID(p.ID) {
		t.Fatalf("assigned id %q, want 16 lowercase hex characters", p.ID)
	}
	const given = "0123456789abcdef"
	if err := s.CreateProject(api.Project{Name: "api", ID: given}); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Project("api"); p.ID != given {
		t.Fatalf("id %q, want the given %q", p.ID, given)
	}
	err = s.CreateProject(api.Project{Name: "bad", ID: "ABC"})
	if !errors.Is(err, ErrInvalid) || err.Error() != `project "bad" id "ABC": invalid input: want 16 lowercase hex characters` {
		t.Fatalf("bad id: %v", err)
	}
	_, err = s.UpdateProject("web", func(p *api.Project) error { p.ID = given; return nil })
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("changing the id: %v, want ErrInvalid", err)
	}
	if q, _ := s.Project("web"); q.ID != p.ID {
		t.Fatalf("id changed to %q", q.ID)
	}
	// Deleted and created again: another project, another id.
	if err := s.DeleteProject("web"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if q, _ := s.Project("web"); q.ID == p.ID || !ValidProjectID(q.ID) {
		t.Fatalf("recreated project's id %q (old %q)", q.ID, p.ID)
	}
}

// TestProjectIDsMigration opens a store written before project ids: every
// project gets an id once (the same at every later open), and each project
// chat is bound to its project's id only when that project is its owner's.
func TestProjectIDsMigration(t *testing.T) {
	s, path := newTestStore(t)
	raw := func(b []byte, key string, v any) {
		t.Helper()
		err := s.update(func(tx *bolt.Tx) error {
			data, _ := json.Marshal(v)
			return tx.Bucket(b).Put([]byte(key), data)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Records as an old binary wrote them: no "id", no "projectId".
	raw(bucketProjects, "web", map[string]any{"name": "web", "owner": "alice", "container": "remote-web", "status": "stopped"})
	raw(bucketProjects, "open", map[string]any{"name": "open", "container": "remote-open", "status": "missing"})
	raw(bucketChats, "a1a1", map[string]any{"id": "a1a1", "owner": "alice", "provider": "claude", "project": "web"})
	raw(bucketChats, "b2b2", map[string]any{"id": "b2b2", "owner": "bob", "provider": "claude", "project": "web"})
	raw(bucketChats, "c3c3", map[string]any{"id": "c3c3", "owner": "bob", "provider": "claude", "project": "open"})
	raw(bucketChats, "d4d4", map[string]any{"id": "d4d4", "owner": "bob", "provider": "claude", "project": "gone"})
	raw(bucketChats, "e5e5", map[string]any{"id": "e5e5", "owner": "bob", "provider": "claude", "cwd": "/tmp"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path)
	ids := map[string]string{}
	for _, name := range []string{"web", "open"} {
		p, err := s.Project(name)
		if err != nil {
			t.Fatal(err)
		}
		if !ValidProjectID(p.ID) {
			t.Fatalf("project %s id %q after migration", name, p.ID)
		}
		ids[name] = p.ID
	}
	want := map[string]string{"a1a1": ids["web"], "b2b2": "", "c3c3": ids["open"], "d4d4": "", "e5e5": ""}
	check := func(s *Store) {
		t.Helper()
		for id, pid := range want {
			c, err := s.Chat(id)
			if err != nil {
				t.Fatal(err)
			}
			if c.ProjectID != pid {
				t.Errorf("chat %s (owner %s, project %q) bound to %q, want %q", id, c.Owner, c.Project, c.ProjectID, pid)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second open changes nothing.
	s = openTest(t, path)
	defer s.Close()
	for name, id := range ids {
		if p, _ := s.Project(name); p.ID != id {
			t.Fatalf("project %s id %q at the second open, was %q", name, p.ID, id)
		}
	}
	check(s)
}

func TestChatProjectIDValidated(t *testing.T) {
	s, _ := newTestStore(t)
	for _, c := range []api.Chat{
		{ID: "a1a1", Provider: "claude", Project: "web", ProjectID: "XYZ"},
		{ID: "a1a1", Provider: "claude", ProjectID: "0123456789abcdef"},
	} {
		if err := s.CreateChat(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateChat(%+v): %v, want ErrInvalid", c, err)
		}
	}
	if err := s.CreateChat(api.Chat{ID: "a1a1", Provider: "claude", Project: "web", ProjectID: "0123456789abcdef"}); err != nil {
		t.Fatal(err)
	}
}
