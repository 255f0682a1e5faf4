package store

import (
	"encoding/json"
	"testing"

	"remote/api"
)

// TestRunRecordGoesWithTheRunningMark: a run's record and the position of
// its newest stored event are kept while the chat runs, the position is
// written by the transaction that stores the event, survives a reopen, and
// both go in the transaction that clears the running mark.
func TestRunRecordGoesWithTheRunningMark(t *testing.T) {
	s, path := newTestStore(t)
	if err := s.CreateChat(api.Chat{ID: "abcd0001", Provider: "claude"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateChat("abcd0001", func(c *api.Chat) error { c.Running = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun("abcd0001", RunRecord{RunID: "r1", Provider: "claude", UserSeq: 1, Request: json.RawMessage(`{"prompt":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunShim("abcd0001", "r1", json.RawMessage(`{"dir":"/state/runs/r1"}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRunShim("abcd0001", "r0", json.RawMessage(`{}`)); err == nil {
		t.Fatal("SetRunShim of another run succeeded")
	}
	done := make(chan error, 3)
	for i, m := range []RunMark{{RunID: "r1", Line: 0, Index: 1}, {RunID: "r1", Line: 120, Index: 2}, {RunID: "r1", Line: 0, Index: 5}} {
		s.AppendAsyncAt("abcd0001", api.Event{Type: api.EventAssistantText, Text: string(rune('a' + i))}, &m, nil, func(_ api.Event, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openTest(t, path)
	rec, ok, err := s.Run("abcd0001")
	if err != nil || !ok {
		t.Fatalf("Run after reopen: %v %v", ok, err)
	}
	// The newest position wins; an older one written later does not move it back.
	if !rec.HasNext || rec.Next.Line != 120 || rec.Next.Index != 2 || string(rec.Shim) != `{"dir":"/state/runs/r1"}` || rec.UserSeq != 1 {
		t.Fatalf("record: %+v", rec)
	}
	if runs, err := s.Runs(); err != nil || len(runs) != 1 || runs["abcd0001"].RunID != "r1" {
		t.Fatalf("Runs: %v %v", runs, err)
	}
	if _, _, err := s.UpdateChatAndAppend("abcd0001", func(c *api.Chat) ([]api.Event, error) {
		c.Running = false
		return []api.Event{{Type: api.EventComplete}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Run("abcd0001"); ok {
		t.Fatal("the run's record outlived its running mark")
	}
	// A late event of the ended run stores no stray position.
	m := RunMark{RunID: "r1", Line: 500}
	s.AppendAsyncAt("abcd0001", api.Event{Type: api.EventSystem}, &m, nil, func(_ api.Event, err error) { done <- err })
	<-done
	if err := s.PutRun("abcd0001", RunRecord{RunID: "r2"}); err != nil {
		t.Fatal(err)
	}
	if rec, _, _ := s.Run("abcd0001"); rec.HasNext {
		t.Fatalf("a new run inherited a position: %+v", rec)
	}
	if err := s.PutRun("abcd0002", RunRecord{RunID: "r3"}); err == nil {
		t.Fatal("PutRun for a missing chat succeeded")
	}
}
