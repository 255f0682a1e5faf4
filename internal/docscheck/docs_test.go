package docscheck

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"remote/config"
	"remote/internal/testkit"
)

// maxREADMELines is the README's budget: what a newcomer reads in ten
// minutes. Everything else belongs in docs/.
const maxREADMELines = 300

// markdownFiles are the documents whose links are checked, relative to
// the module root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(testkit.Root(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CONTRIBUTING.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

func TestREADMEFitsTenMinutes(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testkit.Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n > maxREADMELines {
		t.Errorf("README.md has %d lines, more than 300: move the operator's detail to docs/operating.md", n)
	}
}

// TestMarkdownLinksResolve reads every relative link and image of the
// documents: the file must exist, and an #anchor must name a heading of
// it (GitHub's anchors).
func TestMarkdownLinksResolve(t *testing.T) {
	root := testkit.Root()
	headings := map[string]map[string]bool{}
	anchorsOf := func(file string) (map[string]bool, error) {
		if a, ok := headings[file]; ok {
			return a, nil
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		a := anchors(string(data))
		headings[file] = a
		return a, nil
	}
	checked := 0
	for _, name := range markdownFiles(t) {
		file := filepath.Join(root, name)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range links(string(data)) {
			target, anchor, _ := strings.Cut(l.dest, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			path := file
			if target != "" {
				path = filepath.Join(filepath.Dir(file), filepath.FromSlash(target))
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link %q: no file %s", name, l.line, l.dest, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(path, ".md") {
				continue
			}
			a, err := anchorsOf(path)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", name, l.line, l.dest, err)
				continue
			}
			if !a[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", name, l.line, l.dest, target, anchor)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links checked: is the link reader broken?", checked)
	}
}

// TestConfigReference fails when docs/config.md's default configuration
// is not exactly what remoted -print-default-config prints. With
// REMOTE_UPDATE_DOCS=1 it rewrites the block instead.
func TestConfigReference(t *testing.T) {
	want, err := config.DefaultTOML()
	if err != nil {
		t.Fatal(err) // names the undocumented keys and the fix
	}
	file := filepath.Join(testkit.Root(), "docs", "config.md")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	start, end, err := configBlock(string(data))
	if err != nil {
		t.Fatalf("docs/config.md: %v", err)
	}
	got := string(data[start:end])
	if got == string(want) {
		return
	}
	if os.Getenv("REMOTE_UPDATE_DOCS") == "1" {
		updated := string(data[:start]) + string(want) + string(data[end:])
		if err := os.WriteFile(file, []byte(updated), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote docs/config.md's default configuration")
		return
	}
	t.Errorf("docs/config.md's default configuration differs from remoted -print-default-config at %s\n"+
		"regenerate it with: REMOTE_UPDATE_DOCS=1 go test ./internal/docscheck -run TestConfigReference",
		firstDifference(got, string(want)))
}

// configMarker is the line above the fenced block docs/config.md keeps in
// step with the code.
const configMarker = "<!-- remoted -print-default-config: generated, see TestConfigReference -->\n```toml\n"

// configBlock returns where the generated text sits in docs/config.md.
func configBlock(doc string) (start, end int, err error) {
	i := strings.Index(doc, configMarker)
	if i < 0 {
		return 0, 0, fmt.Errorf("no line %q followed by a ```toml fence", strings.TrimSuffix(configMarker, "\n```toml\n"))
	}
	start = i + len(configMarker)
	if strings.HasPrefix(doc[start:], "```\n") {
		return start, start, nil
	}
	j := strings.Index(doc[start:], "\n```\n")
	if j < 0 {
		return 0, 0, fmt.Errorf("the ```toml block after the marker does not end")
	}
	return start, start + j + 1, nil
}

func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d of the block:\n  docs/config.md: %q\n  remoted:        %q", i+1, gl, wl)
		}
	}
	return "the end"
}

type link struct {
	dest string
	line int
}

var (
	linkRE       = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// links returns the destinations of a document's inline links and images,
// outside code fences and code spans.
func links(doc string) []link {
	var out []link
	fence := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(line, ""), -1) {
			out = append(out, link{dest: m[1], line: i + 1})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives a document's headings: lower
// case, punctuation dropped, spaces as hyphens, "-1", "-2" for repeats.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fence = !fence
			continue
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := slug(text)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"The browser frontend: `remote-web`":                         "the-browser-frontend-remote-web",
		`Provider logins in project containers: what "shared" means`: "provider-logins-in-project-containers-what-shared-means",
		"Remote — operating it":                                      "remote--operating-it",
		"1. Build and install":                                       "1-build-and-install",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
