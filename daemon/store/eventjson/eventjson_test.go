package eventjson

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"remote/api"
)

// The tests of this file pin what mutation testing (make mutate) found
// unpinned in the event decoder: stored events decode exactly as
// encoding/json decodes them, and the form the store writes itself
// (json.Marshal output) takes the fast path that makes replay cheap.

var eventCorpus = []string{
	`{}`, ` { } `, `{"type":"user"}`, `{ "type" : "user" , "t" : 5 }`, "{\"type\":\"user\"}\n",
	`{"seq":3,"t":-7,"type":"x"}`, `{"t":0}`, `{"t":-0}`, `{"t":01}`, `{"t":-}`, `{"t":1.5}`, `{"t":1e3}`,
	`{"t":9223372036854775807}`, `{"t":9223372036854775808}`, `{"t":"5"}`, `{"t":5x}`, `{"t":5 }`, `{"t":9}`,
	`{"isError":true}`, `{"isError":false}`, `{"isError":tru}`, `{"isError":truex}`, `{"isError":true }`,
	`{"running":false,"type":"x"}`, `{"isError":null}`, `{"isError":1}`,
	`{"text":"a\"b"}`, `{"text":"é"}`, `{"text":"\u00e9"}`, "{\"text\":\"\xff\"}", "{\"text\":\"a\x01\"}", "{\"text\":\"\x80\"}", "{\"text\":\"a\x80b\"}",
	`{"text":"x`, `{"text":"\`, `{"text":null}`, `{"text":5}`, `{"text":"~"}`, "{\"text\":\"\x7f\"}",
	`{"input":{"a":[1,2,{"b":"}"}]}}`, `{"input":[1,[2]],"type":"x"}`, `{"input":"s"}`, `{"input":5}`,
	`{"input":null}`, `{"input":{"a":1}`, `{"input":{"a":"\"}"}}`, `{"input":{"a":"x}`, `{"input":tru}`,
	`{"data":{}}`, `{"usage":{"n":1},"native":{"m":"x"}}`, `{"input":{]}`, `{"input":[}`, `{"input":}`,
	`{"Type":"user"}`, `{"TYPE":"user"}`, `{"unknown":1,"type":"x"}`, `{"type":"x",}`, `{"type":"x" "t":1}`,
	`{"type":"x"}x`, `{"type":"x"`, `{"type"`, `{"type":`, `{"type" "x"}`, `{`, ``, `[]`, `null`, `"s"`,
	`{"type":"a","type":"b"}`, `{"type":"x";}`, `{,}`, `{"t":1,}`, `{}x`, `{} }`, `{ } 1`,
}

func TestUnmarshalEventMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	check := func(doc string) {
		t.Helper()
		var got, want api.Event
		gerr := Unmarshal([]byte(doc), &got)
		werr := json.Unmarshal([]byte(doc), &want)
		if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Errorf("Unmarshal(%q) error %v, encoding/json %v", doc, gerr, werr)
			return
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("Unmarshal(%q) = %+v, encoding/json %+v", doc, got, want)
		}
	}
	for _, doc := range eventCorpus {
		check(doc)
		for i := range len(doc) {
			check(doc[:i])
		}
	}
}

func TestCanonicalEventsTakeTheFastPath(t *testing.T) {
	t.Parallel()
	evs := []api.Event{
		{Type: "user", T: 1, Text: "hi"},
		{Type: "user", T: 5, Text: "hello world ~ !"},
		{Seq: 12, T: -3, Type: "tool_use_start", TurnID: "t", MessageID: "m", ID: "i", Name: "Bash",
			Input: json.RawMessage(`{"command":"ls","a":[1,{"b":"]"}]}`), ToolName: "Bash"},
		{Type: "tool_use_end", ID: "i", Output: "a\tb \"q\" é", IsError: true},
		{Type: "system", Subtype: "init", Data: json.RawMessage(`{"x":[]}`), SessionID: "s", Provider: "claude"},
		{Type: "result", Usage: json.RawMessage(`{"inputTokens":3}`), Message: "m", Running: true,
			Native: json.RawMessage(`["a"]`), InteractionID: "q", Status: "ok", Synthetic: "autotest",
			Snapshot: "snap", Project: "p"},
		{Type: "assistant_text", Text: "a" + strings.Repeat("é", 10) + "z"},
		{Type: "x", T: 9223372036854775807},
		{Type: "raw", Input: json.RawMessage(`5`), Usage: json.RawMessage(`true`), Data: json.RawMessage(`-1.5e3`)},
	}
	for _, ev := range evs {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var got api.Event
		if !fast(b, &got) {
			t.Errorf("canonical event %s does not take the fast path", b)
			continue
		}
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("fast path %s = %+v, want %+v", b, got, ev)
		}
	}
	// A plain zero or false (written by hand: json.Marshal omits them) is
	// fast too.
	for _, doc := range []string{`{"t":0,"type":"x"}`, `{"seq":-0,"type":"x"}`, `{"t":0}`, `{"isError":false,"running":false}`} {
		var ev api.Event
		if !fast([]byte(doc), &ev) || ev.T != 0 || ev.Seq != 0 || ev.IsError || ev.Running {
			t.Errorf("fast(%q) declined or wrong: %+v", doc, ev)
		}
	}
	// Forms encoding/json must judge: the fast path declines them.
	for _, doc := range []string{`{"t":01}`, `{"t":1.5}`, `{"Type":"x"}`, `{"input":null}`, `{"text":"\u00e9"}`,
		`{"t":9223372036854775808}`, `{"isError":truex}`, `{"t":5x}`, `{"text":"a"`} {
		var ev api.Event
		if strings.Contains(doc, `\u00e9`) {
			// Escaped strings are unquoted by encoding/json within the fast path.
			if !fast([]byte(doc), &ev) || ev.Text != "é" {
				t.Errorf("fast(%q) = %+v", doc, ev)
			}
			continue
		}
		if fast([]byte(doc), &ev) {
			t.Errorf("fast(%q) took the fast path: %+v", doc, ev)
		}
	}
}

// FuzzUnmarshalEvent checks the fast event decoder against encoding/json:
// the same event, or both fail.
func FuzzUnmarshalEvent(f *testing.F) {
	for _, ev := range []api.Event{
		{Seq: 3, T: 1700000000000, Type: "assistant_text", MessageID: "m", Text: "héllo \"x\"\n"},
		{Type: "tool_use_start", ID: "t1", Name: "Bash", Input: json.RawMessage(`{"command":"ls","n":[1,2.5e3,null,true]}`)},
		{Type: "tool_use_end", ID: "t1", Output: "out", IsError: true},
		{Type: "complete", Usage: json.RawMessage(`{"input_tokens":3}`), Running: true, Data: json.RawMessage(`"s"`)},
		{Seq: 4, Type: "checkpoint", Snapshot: "rc-0123456789ab-3", Project: "p"},
	} {
		raw, _ := json.Marshal(ev)
		f.Add(raw)
	}
	for _, s := range []string{`{}`, ` { "type" : "x" } `, `{"Type":"x"}`, `{"seq":1.0}`, `{"seq":01}`, `{"t":-0}`,
		`{"text":null}`, `{"input":null}`, `{"type":"a","type":"b"}`, `{"data":{]}`, `{"running":truex}`, `{"x":1}`,
		`{"type":"\u00e9\ud800"}`, "{\"text\":\"\xff\"}", `{"seq":99999999999999999999}`, `[]`, `{"type":"x"} {}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got api.Event
		werr := json.Unmarshal(data, &want)
		gerr := Unmarshal(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json error %v, fast error %v", data, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\nencoding/json %+v\nfast          %+v", data, want, got)
		}
	})
}
