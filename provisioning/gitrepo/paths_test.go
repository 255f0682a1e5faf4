package gitrepo

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"remote/internal/errdefs"
)

// TestCheckPaths: push paths that leave the working tree, read as an
// option, hold a control character or break a bound are refused as
// invalid argument naming the path (by its index); plain relative paths,
// pathspec-looking ones included (git takes them literally), pass.
func TestCheckPaths(t *testing.T) {
	good := [][]string{nil, {"src/x.py"}, {"."}, {"docs/", "a b.txt", "Ünïcode", "*", ":(glob)**", "a..b", ".github/x", ".gitignore"}}
	for _, ps := range good {
		if err := CheckPaths(ps); err != nil {
			t.Errorf("CheckPaths(%q): %v", ps, err)
		}
	}
	bad := map[string]string{
		"":                        "must not be empty",
		"../etc/passwd":           "must not contain '..'",
		"a/../../b":               "must not contain '..'",
		"a/..":                    "must not contain '..'",
		"/etc/passwd":             "must be relative",
		"/workspace/x":            "must be relative",
		"-c":                      "must not start with '-'",
		"--upload-pack=x":         "must not start with '-'",
		"a\x00b":                  "must not contain control characters",
		"a\nb":                    "must not contain control characters",
		".git/config":             "must not name .git",
		"a/.git/hooks":            "must not name .git",
		"\xff":                    "not UTF-8",
		strings.Repeat("a", 4097): "longer than 4096 bytes",
	}
	for p, want := range bad {
		err := CheckPaths([]string{"ok.txt", p})
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "paths[1]") {
			t.Errorf("CheckPaths(%q): %v, want invalid argument naming paths[1]: %q", p, err, want)
		}
	}
	many := make([]string, MaxPushPaths+1)
	for i := range many {
		many[i] = "x"
	}
	if err := CheckPaths(many); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("%d paths: %v", len(many), err)
	}
	long := make([]string, 20)
	for i := range long {
		long[i] = fmt.Sprintf("%04d", i) + strings.Repeat("a", 4000)
	}
	if err := CheckPaths(long); !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "together") {
		t.Errorf("20 paths of 4004 bytes: %v", err)
	}
}

// TestBuildOutputExcludes: every BuildOutput entry becomes one exclude
// pathspec matching at any depth.
func TestBuildOutputExcludes(t *testing.T) {
	got := strings.Join(buildOutputExcludes(), " ")
	want := ":(exclude,glob)**/__pycache__/** :(exclude,glob)**/*.pyc :(exclude,glob)**/.pytest_cache/** " +
		":(exclude,glob)**/.mypy_cache/** :(exclude,glob)**/node_modules/** :(exclude,glob)**/*.o"
	if got != want {
		t.Errorf("excludes %q, want %q", got, want)
	}
}
