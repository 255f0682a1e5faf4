package antigravity

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestChunker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reads []string
		want  []string
	}{
		{[]string{"plain\n\n", "text"}, []string{"plain\n\n", "text"}},
		{[]string{"caf\xc3", "\xa9!"}, []string{"caf", "é!"}},
		{[]string{"\xe2", "\x9c", "\x93 ok"}, []string{"", "", "✓ ok"}},
		{[]string{"emoji \xf0\x9f", "\x98\x80"}, []string{"emoji ", "😀"}},
		{[]string{"bad \xff byte"}, []string{"bad \xff byte"}}, // invalid bytes pass through
	}
	for _, tt := range tests {
		var c chunker
		var got []string
		for _, r := range tt.reads {
			got = append(got, c.push([]byte(r)))
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || c.flush() != "" {
			t.Errorf("reads %q → %q, want %q", tt.reads, got, tt.want)
		}
	}
	var c chunker
	if c.push([]byte("x\xe2\x9c")) != "x" || c.flush() != "\xe2\x9c" {
		t.Error("flush must return a truncated sequence at EOF")
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	var tl tail
	for i := 0; i < 1000; i++ {
		tl.Write([]byte("0123456789"))
	}
	tl.Write([]byte("END"))
	if s := tl.String(); len(s) != 4096 || !strings.HasSuffix(s, "END") {
		t.Fatalf("tail %d bytes", len(s))
	}
	tl.Write([]byte(strings.Repeat("y", 3*TailSize)))
	if s := tl.String(); len(s) != 4096 || strings.Contains(s, "END") {
		t.Fatal("big write")
	}
}

func TestCombine(t *testing.T) {
	t.Parallel()
	if got := combine("out", "err"); got != "out\nerr" {
		t.Errorf("combine = %q", got)
	}
	if got := combine("", "err"); got != "err" {
		t.Errorf("combine = %q", got)
	}
	big := combine(strings.Repeat("é", TailSize), "fatal")
	if len(big) > 4096 || !strings.HasSuffix(big, "\nfatal") || !utf8.ValidString(big) {
		t.Errorf("combine kept %d bytes", len(big))
	}
}

func TestNeedsSignIn(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"Please Sign In to continue": true, "You are signed out": true, "error: not authenticated": true,
		"sign-in required": true, "Not signed in.": true, "quota exceeded": false, "": false,
	} {
		if needsSignIn(in) != want {
			t.Errorf("needsSignIn(%q) = %v", in, !want)
		}
	}
}

func TestNewConversation(t *testing.T) {
	t.Parallel()
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	if got := newConversation(set("a"), set("a", "b")); got != "b" {
		t.Errorf("one new: %q", got)
	}
	if got := newConversation(set("a"), set("a", "b", "c")); got != "" {
		t.Errorf("two new: %q", got)
	}
	if got := newConversation(set("a"), set("a")); got != "" {
		t.Errorf("none new: %q", got)
	}
	if got := newConversation(set("a", "b"), set("c")); got != "c" {
		t.Errorf("replaced: %q", got)
	}
}

// FuzzChunker: however output is split into reads, the chunks join to the
// output, and for valid UTF-8 output every chunk is valid UTF-8.
func FuzzChunker(f *testing.F) {
	f.Add([]byte("café ✓ 😀\n\n# md"), uint8(3))
	f.Add([]byte("\xff\xfe\xe2"), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, step uint8) {
		n := int(step%16) + 1
		var c chunker
		var joined strings.Builder
		for i := 0; i < len(data); i += n {
			s := c.push(data[i:min(i+n, len(data))])
			if utf8.Valid(data) && !utf8.ValidString(s) {
				t.Fatalf("chunk %q of valid input is invalid", s)
			}
			if len(c.carry) >= utf8.UTFMax {
				t.Fatalf("carry grew to %d", len(c.carry))
			}
			joined.WriteString(s)
		}
		joined.WriteString(c.flush())
		if joined.String() != string(data) {
			t.Fatalf("joined %q, want %q", joined.String(), data)
		}
	})
}
