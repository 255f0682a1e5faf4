package claude

import (
	"encoding/json"
	"testing"

	"remote/providers"
)

// The scanner decodes like encoding/json (unicode escapes, bytes around
// ASCII, escaped strings), and the parser's edges: an assistant error's
// text, the reasons a line is skipped, the OAuth URL on the next line,
// every streamed message remembered.

// decodeLikeEncodingJSON checks that walkObject accepts doc exactly when
// encoding/json does, and decodes every key and string value the same.
func decodeLikeEncodingJSON(t *testing.T, doc string) {
	t.Helper()
	got := map[string]string{}
	err := walkObject([]byte(doc), func(k, v []byte) error {
		s, err := jsonString(string(k), v)
		if err != nil {
			s = "raw:" + string(v)
		}
		got[string(k)] = s
		return nil
	})
	var ref map[string]any
	refErr := json.Unmarshal([]byte(doc), &ref)
	if (err == nil) != (refErr == nil) {
		t.Errorf("walkObject(%q) error = %v, encoding/json: %v", doc, err, refErr)
		return
	}
	if err != nil {
		return
	}
	if len(got) != len(ref) {
		t.Errorf("walkObject(%q) = %q, encoding/json %q", doc, got, ref)
	}
	for k, v := range ref {
		if s, ok := v.(string); ok && got[k] != s {
			t.Errorf("walkObject(%q)[%q] = %q, encoding/json %q", doc, k, got[k], s)
		}
		if _, ok := got[k]; !ok {
			t.Errorf("walkObject(%q) has no key %q (got %q)", doc, k, got)
		}
	}
}

// A \u escape takes exactly the hex digits 0-9, a-f and A-F; the bytes
// next to those ranges are refused, as encoding/json refuses them.
func TestScanUnicodeEscapeTakesEveryHexDigit(t *testing.T) {
	t.Parallel()
	for _, d := range "0123456789abcdefABCDEF/:@G`g" {
		decodeLikeEncodingJSON(t, `{"a":"\u00`+string(d)+string(d)+`"}`)
		decodeLikeEncodingJSON(t, `{"\u00`+string(d)+string(d)+`":1}`)
	}
	for doc, want := range map[string]string{`{"a":"\u00ff"}`: "ÿ", `{"a":"\u00FF"}`: "ÿ", `{"a":"\u0030\u0039"}`: "09"} {
		var got string
		err := walkObject([]byte(doc), func(_, v []byte) error {
			var err error
			got, err = jsonString("a", v)
			return err
		})
		if err != nil || got != want {
			t.Errorf("walkObject(%s) = %q, %v; want %q", doc, got, err, want)
		}
	}
}

// Bytes at the ASCII boundary (0x7f, 0x80) in keys and values decode like
// encoding/json decodes them: a byte of 0x80 or more that is not valid
// UTF-8 becomes U+FFFD.
func TestScanBytesAroundASCIIDecodeLikeEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"\x7f", "\x80", "a\x80", "\x80a", "\xc3\xa9", "é\x80", "\x1f", " "} {
		decodeLikeEncodingJSON(t, `{"a":"`+s+`"}`)
		decodeLikeEncodingJSON(t, `{"`+s+`":"v"}`)
	}
	for raw, want := range map[string]string{"\"\x80\"": "\ufffd", "\"a\x80\"": "a\ufffd", "\"\x7f\"": "\x7f"} {
		if got, err := jsonString("s", []byte(raw)); err != nil || got != want {
			t.Errorf("jsonString(%q) = %q, %v; want %q", raw, got, err, want)
		}
	}
}

// jsonStringLike returns a known string only when the raw value spells it
// without escapes: an escaped value is decoded, even when its raw text
// equals a known string.
func TestJSONStringLikeDecodesEscapedValues(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw, known, want string
	}{
		{`"\\"`, `\\`, `\`},
		{`"\\x"`, `\\x`, `\x`},
		{`"\u0073"`, `\u0073`, "s"},
		{`"a\\"`, `a\\`, `a\`},
	} {
		if got, err := jsonStringLike("s", []byte(tt.raw), tt.known); err != nil || got != tt.want {
			t.Errorf("jsonStringLike(%s, %q) = %q, %v; want %q", tt.raw, tt.known, got, err, tt.want)
		}
	}
	// Through the parser: a session id `\\` (two backslashes), then one
	// spelled "\\" (one backslash) is a new session.
	got := parseAll(t, NewParser(""), `{"type":"system","subtype":"init","session_id":"\\\\"}`,
		`{"type":"system","subtype":"status","session_id":"\\"}`)
	want := []string{`session.updated session=\\`, "system subtype=init", `session.updated session=\`, "system subtype=status"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}

// An assistant message carrying an API error repeats what the result
// record reports as run.failed: its text is not shown, even with a real
// model name; "error":null is no error, its text is shown.
func TestParserAssistantErrorHidesTextOnlyWhenSet(t *testing.T) {
	t.Parallel()
	got := parseAll(t, NewParser(""),
		`{"type":"assistant","error":"rate_limit","message":{"id":"e1","model":"claude-x","content":[{"type":"text","text":"API Error: 429"}]}}`,
		`{"type":"assistant","error":null,"message":{"id":"m1","model":"claude-x","content":[{"type":"text","text":"hello"}]}}`,
		`{"type":"assistant","message":{"id":"m2","model":"claude-x","content":[{"type":"text","text":"again"}]}}`,
	)
	want := []string{`assistant.delta msg=m1 kind=message text="hello"`, `assistant.delta msg=m2 kind=message text="again"`}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A skipped line's warning in the log names why: a line that is valid JSON
// but no object is no "invalid JSON"; a line cut after a whole literal or
// a whole \u escape is unterminated, not an invalid literal or escape.
func TestParserSkippedLineReasons(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`null`:         "claude stream-json line: JSON value: not an object",
		`true`:         "claude stream-json line: JSON value: not an object",
		` false`:       "claude stream-json line: JSON value: not an object",
		`{"a":true`:    "claude stream-json line: invalid JSON: unterminated object at offset 9",
		`{"a":nul`:     "claude stream-json line: invalid JSON: invalid literal at offset 5",
		`{"a":[null`:   "claude stream-json line: invalid JSON: unterminated array at offset 10",
		`{"a":"\u0041`: "claude stream-json line: invalid JSON: unterminated string at offset 12",
		`{"a":"\u004`:  "claude stream-json line: invalid JSON: invalid escape at offset 7",
	} {
		_, err := NewParser("").ParseLine([]byte(line))
		if err == nil || err.Error() != want {
			t.Errorf("ParseLine(%s) error = %v, want %q", line, err, want)
		}
	}
}

// Claude Code 2.1.332 prints the sign-in URL on the line after "visit:";
// the first whole https:// line is the URL, a later one (or a partial
// line still being read) does not replace it.
func TestOAuthParserURLOnTheNextLine(t *testing.T) {
	t.Parallel()
	var st providers.LoginStatus
	o := &oauthParser{}
	for _, l := range []struct {
		line    string
		partial bool
	}{
		{"Opening browser to sign in…", false},
		{"If the browser didn't open, visit:", false},
		{"https://claude.com/cai/oauth/auth", true},
		{"https://claude.com/cai/oauth/authorize?code=true&state=abc", false},
		{"https://example.com/other", false},
		{"Paste code here if prompted > ", true},
	} {
		o.Line(l.line, l.partial, &st)
	}
	if st.URL != "https://claude.com/cai/oauth/authorize?code=true&state=abc" || !st.NeedsCode {
		t.Errorf("status %+v", st)
	}
}

// Every streamed message is remembered, not only the last: a message that
// streamed thinking and then text, and another that streamed before the
// first one's full record arrived, are not repeated by their records.
func TestParserRemembersEveryStreamedMessage(t *testing.T) {
	t.Parallel()
	delta := func(kind, field, text string) string {
		return `{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"` + kind + `","` + field + `":"` + text + `"}}}`
	}
	got := parseAll(t, NewParser(""),
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m1"}}}`,
		delta("thinking_delta", "thinking", "hmm"),
		delta("text_delta", "text", "one"),
		`{"type":"stream_event","event":{"type":"message_start","message":{"id":"m2"}}}`,
		delta("text_delta", "text", "two"),
		`{"type":"assistant","message":{"id":"m1","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"one"}]}}`,
		`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"two"}]}}`,
	)
	want := []string{`reasoning.delta msg=m1 kind=reasoning text="hmm"`, `assistant.delta msg=m1 kind=message text="one"`,
		`assistant.delta msg=m2 kind=message text="two"`}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %q, want %q", i, got[i], want[i])
		}
	}
}
