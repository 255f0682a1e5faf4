package render

import "testing"

func TestStripControls(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain\ttext\n", "plain\ttext\n"},
		{"ünïcødé ✓", "ünïcødé ✓"},
		{"a\x1b[38;5;196mb", "ab"},
		{"a\x1b]8;;https://evil\x1b\\link\x1b]8;;\x1b\\b", "alinkb"},
		{"a\x1b]52;c;unterminated", "a"},
		{"a\x1b]0;t\x1b[31mb", "ab"}, // ESC aborts the string and starts its own sequence
		{"a\x1b7b\x1b8c\x1bc", "abc"},
		{"a\u009d0;t\u009cb", "ab"},
		{"a\u0090q\u009cb\u0098x\u009cc\u009e\u009c\u009f\u009cd", "abcd"},
		{"a\xff\x9bb", "ab"}, // invalid UTF-8, raw C1 bytes
		{"tail\x1b", "tail"},
		{"a\x1b[", "a"},
	} {
		if got := StripControls(tt.in); got != tt.want {
			t.Errorf("StripControls(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
