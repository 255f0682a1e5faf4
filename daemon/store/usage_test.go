package store

import (
	"path/filepath"
	"testing"
	"time"
)

// A run re-attached after a crash that fell between its usage record and
// its stored completion parses that completion again and records its usage
// a second time: the run must still count once, tokens and cost.
func TestFaultUsageRecordedAgainAfterCrash(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"))
	first := UsageRecord{T: 1_700_000_000_000, RunID: "run-1", ChatID: "c0ffee01", Owner: "alice",
		Provider: "claude", InputTokens: 100, OutputTokens: 20, CostUSD: 0.5}
	got, err := s.RecordUsage(first, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.CostUSD != 0.5 {
		t.Fatalf("first record's cost = %v, want 0.5", got.CostUSD)
	}
	again := first
	again.T += 5_000 // recorded again by the next daemon, seconds later
	got, err = s.RecordUsage(again, true)
	if err != nil {
		t.Fatal(err)
	}
	if got != first {
		t.Fatalf("second RecordUsage of run-1 returned %+v, want the stored %+v", got, first)
	}
	var recs []UsageRecord
	if err := s.Usage(time.Time{}, time.Time{}, func(r UsageRecord) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0] != first {
		t.Fatalf("usage records = %+v, want only %+v", recs, first)
	}
	// The cumulative mark was not moved: the chat's next run is charged
	// its own share of the session's total (0.75 - 0.5).
	next, err := s.RecordUsage(UsageRecord{T: first.T + 60_000, RunID: "run-2", ChatID: "c0ffee01",
		Owner: "alice", Provider: "claude", CostUSD: 0.75}, true)
	if err != nil {
		t.Fatal(err)
	}
	if next.CostUSD != 0.25 {
		t.Fatalf("next run's cost = %v, want 0.25", next.CostUSD)
	}
}

// A mark stored without a provider name (key "<chat>/") sorts first among
// the chat's marks; it must not end the copy, or the fork's first Claude
// run is charged the parent session's whole running total.
func TestFaultNamelessMarkStopsNoForkCopy(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "state.db"))
	for i, p := range []string{"", "claude"} {
		if _, err := s.RecordUsage(UsageRecord{T: int64(10 + i), RunID: "p" + p, ChatID: "c0ffee02", Owner: "alice",
			Provider: p, CostUSD: 2}, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CopyUsageMarks("c0ffee02", "c0ffee03"); err != nil {
		t.Fatal(err)
	}
	rec, err := s.RecordUsage(UsageRecord{T: 20, RunID: "f1", ChatID: "c0ffee03", Owner: "alice",
		Provider: "claude", CostUSD: 2.5}, true)
	if err != nil {
		t.Fatal(err)
	}
	if rec.CostUSD != 0.5 {
		t.Fatalf("fork's first claude run charged %v, want 0.5 (2.5 - the parent's 2)", rec.CostUSD)
	}
}
