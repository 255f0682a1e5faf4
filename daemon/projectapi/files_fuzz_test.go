package projectapi

import (
	"path"
	"strings"
	"testing"
)

// FuzzWorkspacePath: whatever the query says, an accepted path is
// absolute, clean, free of NUL bytes and /workspace or beneath it; a
// refusal names path.
func FuzzWorkspacePath(f *testing.F) {
	for _, s := range []string{
		"", ".", "..", "a/b", "/workspace", "/workspace/", "/workspace/../etc", "../etc/passwd", "/etc/passwd",
		"/workspacex/y", "a/../../b", "./a//b/./c/", "a\x00b", "/", "//workspace//a", strings.Repeat("a/", 3000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, err := WorkspacePath(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "path") {
				t.Fatalf("WorkspacePath(%q): error %q does not name path", raw, err)
			}
			return
		}
		if p != path.Clean(p) || !path.IsAbs(p) || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("WorkspacePath(%q) = %q: not absolute and clean", raw, p)
		}
		if p != "/workspace" && !strings.HasPrefix(p, "/workspace/") {
			t.Fatalf("WorkspacePath(%q) = %q: outside /workspace", raw, p)
		}
	})
}

func TestWorkspacePath(t *testing.T) {
	for _, tc := range []struct{ raw, want, err string }{
		{".", "/workspace", ""},
		{"a/b/../c", "/workspace/a/c", ""},
		{"/workspace/x/", "/workspace/x", ""},
		{"/workspace/../workspace/y", "/workspace/y", ""},
		{"", "", "path: must not be empty; give a path under /workspace"},
		{"a\x00b", "", "path: contains a NUL byte"},
		{"../etc/passwd", "", `path "../etc/passwd": outside /workspace`},
		{"/etc/passwd", "", `path "/etc/passwd": outside /workspace`},
		{"/workspace/../etc", "", `path "/workspace/../etc": outside /workspace`},
		{"/workspacex", "", `path "/workspacex": outside /workspace`},
		{"..", "", `path "..": outside /workspace`},
		{strings.Repeat("a", 4097), "", "path: longer than 4096 bytes"},
	} {
		got, err := WorkspacePath(tc.raw)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if got != tc.want || msg != tc.err {
			t.Errorf("WorkspacePath(%.40q) = %q, %q; want %q, %q", tc.raw, got, msg, tc.want, tc.err)
		}
	}
}
