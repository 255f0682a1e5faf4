// Package lazyre holds a package-level regular expression that compiles on
// its first use instead of at program start. remoted's validators use
// bounded repetitions ({0,127}) that expand into large programs: compiled
// at start-up they cost about a third of the process's own start, which,
// on a host busy with agent CLIs, delays the daemon's first answer after a
// restart. It imports the standard library only.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use. A pattern that does not
// compile panics there, as regexp.MustCompile would at start-up.
type Regexp struct {
	pat  string
	once sync.Once
	re   *regexp.Regexp
}

// New returns pat, to be compiled on first use.
func New(pat string) *Regexp { return &Regexp{pat: pat} }

func (r *Regexp) get() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.pat) })
	return r.re
}

// String returns the source text.
func (r *Regexp) String() string { return r.pat }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.get().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.get().FindStringSubmatch(s) }

// FindSubmatch is regexp.Regexp.FindSubmatch.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.get().FindSubmatch(b) }

// FindIndex is regexp.Regexp.FindIndex.
func (r *Regexp) FindIndex(b []byte) []int { return r.get().FindIndex(b) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.get().ReplaceAllString(src, repl)
}
