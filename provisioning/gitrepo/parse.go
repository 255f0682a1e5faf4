package gitrepo

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"remote/api"
)

// ParseDiff parses the output of `git diff --no-renames --raw --numstat
// -z`: the raw records (":<modes> <ids> <status>\0<path>\0") give each
// path and its status, then the numstat records
// ("<added>\t<deleted>\t<path>\0", "-\t-" for a binary file) its line
// counts. Files are in git's order.
func ParseDiff(b []byte) ([]api.DiffFile, error) {
	toks := bytes.Split(b, []byte{0})
	if n := len(toks); n > 0 && len(toks[n-1]) == 0 {
		toks = toks[:n-1]
	}
	files := []api.DiffFile{}
	at := map[string]int{}
	for i := 0; i < len(toks); i++ {
		tok := string(toks[i])
		if strings.HasPrefix(tok, ":") {
			f := strings.Fields(tok[1:])
			if len(f) != 5 || i+1 >= len(toks) || len(toks[i+1]) == 0 {
				return nil, fmt.Errorf("git diff: bad raw record %q", tok)
			}
			status := f[4][:1]
			if !strings.Contains("AMDT", status) {
				return nil, fmt.Errorf("git diff: unexpected status %q", f[4])
			}
			i++
			path := string(toks[i])
			if _, dup := at[path]; dup {
				return nil, fmt.Errorf("git diff: %q listed twice", path)
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
	return files, nil
}
