package providers

import (
	"testing"
)

func TestStampEvents(t *testing.T) {
	var got []Event
	out := StampEvents(func(ev Event) { got = append(got, ev) }, Codex, RunRequest{ConversationID: "c", RunID: "r"})
	out(Event{Type: EventRunStarted})
	out(Event{Type: EventRunStarted, Provider: Claude, ConversationID: "c2", RunID: "r2"})
	want := []Event{
		{Type: EventRunStarted, Provider: Codex, ConversationID: "c", RunID: "r"},
		{Type: EventRunStarted, Provider: Claude, ConversationID: "c2", RunID: "r2"},
	}
	if len(got) != 2 || got[0].Provider != want[0].Provider || got[0].ConversationID != "c" || got[0].RunID != "r" ||
		got[1].Provider != want[1].Provider || got[1].ConversationID != "c2" || got[1].RunID != "r2" {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}
