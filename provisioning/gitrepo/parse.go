package gitrepo

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"remote/api"
)

// Bounds of a diff's file list (issue 26; security review finding 5): a
// list beyond one is refused with a *TooLargeError, never held.
const (
	// DefaultMaxDiffFiles is how many files a diff may list when the
	// caller gives no bound.
	DefaultMaxDiffFiles = 10000
	// MaxDiffPathBytes bounds one path of a diff (Linux's PATH_MAX).
	MaxDiffPathBytes = 4096
	// MaxDiffListBytes bounds git's listing of a diff's files (its raw
	// and numstat records: each path twice and about 100 bytes more).
	MaxDiffListBytes = 4 << 20
)

// TooLargeError is a diff refused because it is beyond one of its
// bounds: What names the bound ("files", "path", "list"), Limit its value.
type TooLargeError struct {
	What  string
	Limit int
}

// Error names the bound.
func (e *TooLargeError) Error() string {
	switch e.What {
	case "files":
		return fmt.Sprintf("the diff lists more than %d files", e.Limit)
	case "path":
		return fmt.Sprintf("the diff holds a path longer than %d bytes", e.Limit)
	default:
		return fmt.Sprintf("the diff's file list (its paths and git's records of them) is longer than %d bytes", e.Limit)
	}
}

// ParseDiff parses the output of `git diff --no-renames --raw --numstat
// -z`: the raw records (":<modes> <ids> <status>\0<path>\0") give each
// path and its status, then the numstat records
// ("<added>\t<deleted>\t<path>\0", "-\t-" for a binary file) its line
// counts. Files are in git's order. More than maxFiles files (0:
// DefaultMaxDiffFiles) or a path longer than MaxDiffPathBytes is a
// *TooLargeError; b is not copied (the paths are).
func ParseDiff(b []byte, maxFiles int) ([]api.DiffFile, error) {
	if maxFiles <= 0 {
		maxFiles = DefaultMaxDiffFiles
	}
	next := func() ([]byte, bool) {
		if len(b) == 0 {
			return nil, false
		}
		tok := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			tok, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		return tok, true
	}
	files := []api.DiffFile{}
	at := map[string]int{}
	for {
		raw, ok := next()
		if !ok {
			return files, nil
		}
		if len(raw) > MaxDiffPathBytes+64 {
			return nil, &TooLargeError{What: "path", Limit: MaxDiffPathBytes}
		}
		tok := string(raw)
		if strings.HasPrefix(tok, ":") {
			f := strings.Fields(tok[1:])
			p, ok := next()
			if len(f) != 5 || !ok || len(p) == 0 {
				return nil, fmt.Errorf("git diff: bad raw record %q", tok)
			}
			status := f[4][:1]
			if !strings.Contains("AMDT", status) {
				return nil, fmt.Errorf("git diff: unexpected status %q", f[4])
			}
			if len(p) > MaxDiffPathBytes {
				return nil, &TooLargeError{What: "path", Limit: MaxDiffPathBytes}
			}
			path := string(p)
			if _, dup := at[path]; dup {
				return nil, fmt.Errorf("git diff: %q listed twice", path)
			}
			if len(files) == maxFiles {
				return nil, &TooLargeError{What: "files", Limit: maxFiles}
			}
			at[path] = len(files)
			files = append(files, api.DiffFile{Path: path, Status: status})
			continue
		}
		f := strings.SplitN(tok, "\t", 3)
		if len(f) != 3 || f[2] == "" {
			return nil, fmt.Errorf("git diff: bad numstat record %q", tok)
		}
		j, ok := at[f[2]]
		if !ok {
			return nil, fmt.Errorf("git diff: numstat for %q without a raw record", f[2])
		}
		if f[0] == "-" && f[1] == "-" {
			files[j].Binary = true
			continue
		}
		add, err1 := strconv.Atoi(f[0])
		del, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || add < 0 || del < 0 {
			return nil, fmt.Errorf("git diff: bad line counts in %q", tok)
		}
		files[j].Additions, files[j].Deletions = add, del
	}
}
