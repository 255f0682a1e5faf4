package kimi

import (
	"fmt"
	"strings"
	"testing"

	"remote/providers"
)

func render(e providers.Event) string {
	var b strings.Builder
	b.WriteString(string(e.Type))
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, v)
		}
	}
	add("session", e.SessionID)
	add("msg", e.MessageID)
	add("item", e.ItemID)
	add("tool", e.ToolName)
	add("input", string(e.Input))
	if e.Text != "" {
		fmt.Fprintf(&b, " text=%q", e.Text)
	}
	if e.Type == providers.EventToolCompleted {
		fmt.Fprintf(&b, " output=%q", e.Output)
	}
	if e.Native != nil {
		fmt.Fprintf(&b, " native=%s", e.Native.Method)
	}
	return b.String()
}

func TestParser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		resume string
		lines  []string
		want   []string
	}{
		{
			name:  "string content",
			lines: []string{`{"role":"assistant","content":"Hello! How can I help?"}`},
			want:  []string{`assistant.delta msg=kimi-1 text="Hello! How can I help?"`},
		},
		{
			name:  "array content with text and think parts",
			lines: []string{`{"role":"assistant","content":[{"type":"think","think":"hmm"},{"type":"text","text":"one"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"two"}]}`},
			want: []string{`reasoning.delta msg=kimi-1 text="hmm"`,
				`assistant.delta msg=kimi-1 text="one"`, `assistant.delta msg=kimi-1 text="two"`},
		},
		{
			name: "tool calls and results correlated",
			lines: []string{
				`{"role":"assistant","content":"Let me check.","tool_calls":[{"type":"function","id":"tc_1","function":{"name":"Shell","arguments":"{\"command\":\"ls\"}"}},{"type":"function","id":"tc_2","function":{"name":"Read","arguments":{"path":"a"}}},{"type":"function","id":"tc_3","function":{"name":"Odd","arguments":"not json"}},{"id":"","function":{"name":"NoID"}}]}`,
				`{"role":"tool","tool_call_id":"tc_1","content":"file1.py\nfile2.py"}`,
				`{"role":"tool","tool_call_id":"tc_2","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`,
				`{"role":"tool","tool_call_id":"tc_9","content":"unknown call"}`,
				`{"role":"tool","content":"no id"}`,
			},
			want: []string{
				`assistant.delta msg=kimi-1 text="Let me check."`,
				`tool.started msg=kimi-1 item=tc_1 tool=Shell input={"command":"ls"}`,
				`tool.started msg=kimi-1 item=tc_2 tool=Read input={"path":"a"}`,
				`tool.started msg=kimi-1 item=tc_3 tool=Odd input="not json"`,
				`tool.completed item=tc_1 tool=Shell output="file1.py\nfile2.py"`,
				`tool.completed item=tc_2 tool=Read output="a\nb"`,
				`tool.completed item=tc_9 output="unknown call"`,
			},
		},
		{
			name:  "resume hint: session and completion",
			lines: []string{`{"role":"meta","type":"session.resume_hint","session_id":"s1","content":"To resume this session: kimi -r s1"}`},
			want:  []string{"session.updated session=s1", "run.completed session=s1"},
		},
		{
			name:   "resume hint for the resumed session: completion only",
			resume: "s1",
			lines:  []string{`{"role":"meta","type":"session.resume_hint","session_id":"s1"}`},
			want:   []string{"run.completed session=s1"},
		},
		{
			name: "a second hint completes nothing more",
			lines: []string{`{"role":"meta","type":"session.resume_hint","session_id":"s1"}`,
				`{"role":"meta","type":"session.resume_hint","session_id":"s1"}`},
			want: []string{"session.updated session=s1", "run.completed session=s1"},
		},
		{
			name: "unknown and other meta records are native; echoes dropped",
			lines: []string{`{"role":"meta","type":"system.version","version":"1"}`, `{"type":"Notification","text":"x"}`,
				`{"role":"user","content":"hi"}`, `{"role":"system","content":"sys"}`, `{}`},
			want: []string{"provider.native native=system.version", "provider.native native=Notification", "provider.native native=unknown"},
		},
		{
			name: "malformed nested content and tool_calls ignored",
			lines: []string{`{"role":"assistant","content":{"weird":1},"tool_calls":"nope"}`,
				`{"role":"assistant","content":[1,2],"tool_calls":[{"id":5}]}`,
				`{"role":"tool","tool_call_id":"t","content":{"x":1}}`},
			want: []string{`tool.completed item=t output=""`},
		},
		{
			name:  "malformed top level is an error",
			lines: []string{`{"role":`, `[1]`, `"str"`, `nul`},
			want:  []string{"ERR", "ERR", "ERR", "ERR"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := NewParser(tt.resume)
			var got []string
			for _, l := range tt.lines {
				evs, err := p.ParseLine([]byte(l))
				if err != nil {
					if !strings.HasPrefix(err.Error(), "kimi stream-json line: ") {
						t.Errorf("error %q", err)
					}
					got = append(got, "ERR")
				}
				for _, e := range evs {
					got = append(got, render(e))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func FuzzParser(f *testing.F) {
	for _, s := range []string{
		`{"role":"assistant","content":"x","tool_calls":[{"id":"a","function":{"name":"n","arguments":"{}"}}]}`,
		`{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"think","think":"k"}]}`,
		`{"role":"tool","tool_call_id":"a","content":[{"type":"text","text":"o"}]}`,
		`{"role":"meta","type":"session.resume_hint","session_id":"s"}`, `{"type":"x"}`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := NewParser("")
		for _, line := range strings.Split(string(data), "\n") {
			evs, err := p.ParseLine([]byte(line))
			if err != nil && len(evs) > 0 {
				t.Fatal("events with error")
			}
			for _, e := range evs {
				if len(e.Input) > providers.MaxNativePayload || len(e.Output) > MaxToolOutput+32 ||
					(e.Native != nil && len(e.Native.Payload) > providers.MaxNativePayload) {
					t.Fatalf("unbounded %s", e.Type)
				}
			}
		}
	})
}
