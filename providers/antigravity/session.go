package antigravity

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"remote/internal/lazyre"
	"remote/providers"
)

// BrainDir is the CLI's conversation directory, relative to $HOME.
const BrainDir = ".gemini/antigravity-cli/brain"

// conversationRE is the shape of a conversation directory name.
var conversationRE = lazyre.New(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// maxBrainEntries bounds a directory listing.
const maxBrainEntries = 100000

// lister lists the valid conversation directories of the brain directory.
// A missing brain directory is an empty set, not an error.
type lister func(ctx context.Context) (map[string]bool, error)

// hostLister lists dir on the host.
func hostLister(dir string) lister {
	return func(context.Context) (map[string]bool, error) {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return map[string]bool{}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list brain directory %s: %w", dir, err)
		}
		out := map[string]bool{}
		for i, e := range entries {
			if i >= maxBrainEntries {
				break
			}
			// ReadDir does not follow symlinks: e.IsDir is a real directory.
			if e.IsDir() && conversationRE.MatchString(e.Name()) {
				out[e.Name()] = true
			}
		}
		return out, nil
	}
}

// containerLister lists dir inside a container by running find(1) there.
func containerLister(l providers.Launcher, dir string) lister {
	return func(ctx context.Context) (map[string]bool, error) {
		p, err := l.Start(ctx, providers.Command{
			Path: "sh",
			Args: []string{"-c", `[ -d "$1" ] || exit 0; find "$1" -mindepth 1 -maxdepth 1 -type d`, "sh", dir},
		})
		if err != nil {
			return nil, fmt.Errorf("list brain directory %s: %w", dir, err)
		}
		p.Stdin().Close()
		go io.Copy(io.Discard, p.Stderr())
		out := map[string]bool{}
		sc := bufio.NewScanner(p.Stdout())
		for sc.Scan() {
			name := path.Base(strings.TrimSpace(sc.Text()))
			if len(out) < maxBrainEntries && conversationRE.MatchString(name) {
				out[name] = true
			}
		}
		_, _ = io.Copy(io.Discard, p.Stdout())
		if err := p.Wait(); err != nil {
			return nil, fmt.Errorf("list brain directory %s: %w", dir, err)
		}
		return out, nil
	}
}

// newConversation returns the one directory in after but not in before,
// or "" when there are none or several (ambiguous: no session is saved).
func newConversation(before, after map[string]bool) string {
	found := ""
	for name := range after {
		if before[name] {
			continue
		}
		if found != "" {
			return ""
		}
		found = name
	}
	return found
}
