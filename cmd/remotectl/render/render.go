// Package render prints a chat's events for a person on a terminal:
// assistant text on stdout as it streams; thinking, tool calls, system
// notes and errors on stderr, one line each; every text stripped of
// terminal control sequences (StripControls) unless raw output was asked
// for. It imports the API's wire types and the standard library only;
// never the client or the daemon.
package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"remote/api"
)

// Renderer prints events for a person: assistant text flows to out as it
// streams; thinking (dimmed), tool calls (one line each) and notices go to
// errOut, so out holds only the reply.
type Renderer struct {
	out, err io.Writer
	color    bool
	clean    func(string) string // StripControls, or the identity when raw
	ownRun   bool                // prompt: skip the user event we sent, errors are returned
	msgID    string
	outMid   bool // out has an unterminated line
	errMid   bool // errOut has an unterminated (thinking) line
	tools    map[string]string
}

// New returns a Renderer writing the reply to out and the rest to errOut.
// color dims thinking and notices with ANSI styling; raw prints agent text
// as sent, control sequences included; ownRun is for the run the caller
// started: its user event is not echoed and its run's error event is not
// printed (the caller returns it).
func New(out, errOut io.Writer, color, raw, ownRun bool) *Renderer {
	clean := StripControls
	if raw {
		clean = func(s string) string { return s }
	}
	return &Renderer{out: out, err: errOut, color: color, clean: clean, ownRun: ownRun, tools: map[string]string{}}
}

func (r *Renderer) dim(s string) string {
	if r.color {
		return "\x1b[2m" + s + "\x1b[0m"
	}
	return s
}

// endOut ends an unterminated out line; endErr one on errOut.
func (r *Renderer) endOut() {
	if r.outMid {
		fmt.Fprintln(r.out)
		r.outMid = false
	}
}

func (r *Renderer) endErr() {
	if r.errMid {
		fmt.Fprintln(r.err)
		r.errMid = false
	}
}

// Notice prints one line on errOut.
func (r *Renderer) Notice(format string, args ...any) {
	r.endOut()
	r.endErr()
	fmt.Fprintln(r.err, r.dim(r.clean(fmt.Sprintf(format, args...))))
}

// Event prints ev.
func (r *Renderer) Event(ev api.Event) {
	ev.Text = r.clean(ev.Text)
	switch ev.Type {
	case api.EventAssistantText:
		r.endErr()
		if ev.MessageID != r.msgID && r.outMid {
			r.endOut()
		}
		r.msgID = ev.MessageID
		fmt.Fprint(r.out, ev.Text)
		r.outMid = ev.Text != "" && !strings.HasSuffix(ev.Text, "\n") || (ev.Text == "" && r.outMid)
	case api.EventThinking:
		r.endOut()
		fmt.Fprint(r.err, r.dim(ev.Text))
		r.errMid = ev.Text != "" && !strings.HasSuffix(ev.Text, "\n") || (ev.Text == "" && r.errMid)
	case api.EventUser:
		if !r.ownRun {
			r.endOut()
			fmt.Fprintf(r.out, "> %s\n", strings.ReplaceAll(ev.Text, "\n", "\n> "))
		}
	case api.EventToolUseStart:
		r.tools[ev.ID] = ev.Name
		r.Notice("▸ %s %s", ev.Name, toolSummary(ev.Input))
	case api.EventToolUseEnd:
		name := r.tools[ev.ID]
		delete(r.tools, ev.ID)
		if ev.IsError {
			r.Notice("  ✗ %s: %s", name, OneLine(ev.Output, 100))
		} else {
			r.Notice("  ✓ %s (%d bytes)", name, len(ev.Output))
		}
	case api.EventInteractionRequest:
		r.Notice("? %s needs an answer (interaction %s; remotectl answer CHAT %s accept|decline): %s", ev.Name, ev.InteractionID, ev.InteractionID, Compact(ev.Input, 80))
	case api.EventInteractionResolved:
		r.Notice("? interaction %s %s", ev.InteractionID, ev.Status)
	case api.EventSystem:
		if ev.Subtype != "" {
			if d := SystemDetail(ev); d != "" {
				r.Notice("[%s %s]", ev.Subtype, d)
			} else {
				r.Notice("[%s]", ev.Subtype)
			}
		}
	case api.EventTurnStatus:
		if ev.Status != "" {
			r.Notice("[turn %s]", ev.Status)
		}
	case api.EventError:
		if !r.ownRun || ev.Seq == 0 {
			r.Notice("error: %s", ev.Message)
		}
	case api.EventComplete:
		r.endOut()
		r.endErr()
	}
}

// Finish ends any unterminated line.
func (r *Renderer) Finish() {
	r.endOut()
	r.endErr()
}

// toolSummary picks the telling field of a tool's input (a command, a path,
// a pattern), else its compact JSON, on one short line.
func toolSummary(input json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(input, &m) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "path", "pattern", "url", "query", "description"} {
			switch v := m[k].(type) {
			case string:
				return OneLine(v, 80)
			case []any:
				parts := make([]string, 0, len(v))
				for _, p := range v {
					parts = append(parts, fmt.Sprint(p))
				}
				return OneLine(strings.Join(parts, " "), 80)
			}
		}
	}
	return Compact(input, 80)
}

// SystemDetail is what a daemon system event's data says, on one line:
// the branch and commit of a push, the number and URL of a pull request,
// the repository, ref and commit of a clone or git's message when it
// failed (shapes in docs/api.md, "system"). "" for other subtypes (a
// CLI's own system events carry its raw line) and for data it cannot read.
func SystemDetail(ev api.Event) string {
	var d struct { // JSON keys match the field names, case aside
		URL, Ref, SHA, Branch, Error, Member, Snapshot, Reason string
		Number                                                 int
	}
	if len(ev.Data) == 0 || json.Unmarshal(ev.Data, &d) != nil {
		return ""
	}
	d.SHA = d.SHA[:min(len(d.SHA), 12)]
	var s string
	switch ev.Subtype {
	case api.SubtypePushed:
		s = d.Branch + " at " + d.SHA
	case api.SubtypePullRequest:
		s = fmt.Sprintf("#%d %s", d.Number, d.URL)
	case api.SubtypeRepoCloned:
		s = d.URL + " " + d.Ref + " at " + d.SHA // OneLine drops the space of an empty ref
	case api.SubtypeRepoCloneFailed:
		s = d.URL + ": " + d.Error
	case api.SubtypeContainerEvacuated:
		s = d.Member
	case api.SubtypeCheckpointFailed:
		s = d.Snapshot + ": " + d.Reason
	}
	return OneLine(s, 300)
}

// OneLine flattens s to one line of at most n runes, without terminal
// control sequences (a title or a tool's input may carry them).
func OneLine(s string, n int) string {
	s = strings.Join(strings.Fields(StripControls(s)), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Compact prints raw JSON on one line, clipped to n runes.
func Compact(raw json.RawMessage, n int) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return OneLine(string(raw), n)
	}
	b, _ := json.Marshal(v)
	return OneLine(string(b), n)
}
