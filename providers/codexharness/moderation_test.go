package codexharness

import (
	"strings"
	"testing"

	"remote/providers"
)

// TestModerationDisplay feeds agent messages carrying Codex's moderation
// (the AgentMessageModeration of codex 0.169's app-server schema, and the
// older bare-string display) through the parser: a hidden answer's text is
// never shown (a notice instead), a blocked one is replaced by its reason,
// and unknown shapes pass as provider.native.
func TestModerationDisplay(t *testing.T) {
	msg := func(id, mod string) string {
		return `{"method":"item/completed","params":{` + pt + `,"item":{"id":"` + id + `","type":"agentMessage","text":"secret answer","moderation":` + mod + `}}}`
	}
	tests := []struct {
		name  string
		lines []string
		want  []string
	}{
		{"new shape hide, after streaming started", []string{
			`{"method":"item/agentMessage/delta","params":{` + pt + `,"itemId":"a","delta":"secret"}}`,
			msg("a", `{"moderated":true,"display":{"action":"hide","blockType":null}}`),
		}, []string{"assistant.delta item=a text=secret", "system item=a text=" + ModerationHiddenNotice + " status=hide subtype=moderation"}},
		{"new shape hide on item/started withholds the stream", []string{
			`{"method":"item/started","params":{` + pt + `,"item":{"id":"b","type":"agentMessage","text":"","moderation":{"moderated":true,"display":{"action":"hide"}}}}}`,
			`{"method":"item/agentMessage/delta","params":{` + pt + `,"itemId":"b","delta":"secret"}}`,
			msg("b", `{"moderated":true,"display":{"action":"hide"}}`),
		}, []string{"system item=b text=" + ModerationHiddenNotice + " status=hide subtype=moderation"}},
		{"new shape block with its reason", []string{
			msg("c", `{"moderated":true,"display":{"action":"block","blockType":"cyber"}}`),
		}, []string{"system item=c text=This answer was blocked by moderation: cyber status=block subtype=moderation"}},
		{"old shape hide and block", []string{
			msg("d", `{"display":"hide"}`),
			msg("e", `{"display":"block","reason":"policy violation"}`),
		}, []string{
			"system item=d text=" + ModerationHiddenNotice + " status=hide subtype=moderation",
			"system item=e text=This answer was blocked by moderation: policy violation status=block subtype=moderation",
		}},
		{"not moderated shows the text", []string{
			msg("f", `{"moderated":false,"display":null}`),
		}, []string{"assistant.delta item=f text=secret answer"}},
		{"unknown shapes pass as native and keep the text", []string{
			msg("g", `{"moderated":true,"display":{"action":"blur"}}`),
			msg("h", `[1,2]`),
		}, []string{
			"provider.native method=item/moderation", "assistant.delta item=g text=secret answer",
			"provider.native method=item/moderation", "assistant.delta item=h text=secret answer",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(providers.Codex)
			p.SetThread("T")
			p.SetTurn("U")
			var got []string
			for _, l := range tt.lines {
				evs, err := p.ParseLine([]byte(l))
				if err != nil {
					t.Fatalf("ParseLine(%s): %v", l, err)
				}
				for _, ev := range evs {
					got = append(got, modSummary(ev))
				}
			}
			diff(t, got, tt.want)
		})
	}
}

// modSummary is summarize with the subtype and the whole text.
func modSummary(ev providers.Event) string {
	if ev.Type == providers.EventProviderNative {
		return "provider.native method=" + ev.Native.Method
	}
	parts := []string{string(ev.Type), "item=" + ev.ItemID, "text=" + ev.Text}
	if ev.Status != "" {
		parts = append(parts, "status="+ev.Status)
	}
	if ev.Subtype != "" {
		parts = append(parts, "subtype="+ev.Subtype)
	}
	return strings.Join(parts, " ")
}
