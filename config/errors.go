package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Error classes. Every problem Parse, Load and Validate report is an *Error
// whose Kind is one of these, so callers test with errors.Is.
var (
	// ErrSyntax: the file is not valid TOML.
	ErrSyntax = errors.New("invalid TOML")
	// ErrUnknownKey: a key the schema does not have (misspelt, misplaced,
	// or a table where a value belongs).
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalidValue: a value of the wrong type or outside what the key
	// accepts.
	ErrInvalidValue = errors.New("invalid value")
)

// maxErrors bounds how many problems one Parse reports.
const maxErrors = 20

// Error is one problem with one key of a configuration. Its text reads
// `remoted.toml:7: [agent] credential_sync_timeout: invalid duration "soon"`.
// It never contains a secret value (env values, password hashes).
type Error struct {
	File string // the name given to Parse or Load; "" from Validate alone
	Line int    // 1-based line in File; 0 when unknown
	Key  string // dotted key, array elements as [i]: "web.users[1].name"; "" for syntax errors
	Kind error  // ErrSyntax, ErrUnknownKey or ErrInvalidValue
	Msg  string // what is wrong, lowercase

	path []pathElem
}

// Error renders file:line: [table] key: message, leaving out what is unknown.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if len(e.path) > 0 {
		b.WriteString(displayKey(e.path))
		b.WriteString(": ")
	} else if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the error's class.
func (e *Error) Unwrap() error { return e.Kind }

// pathElem is one step of a key path: a key, or an array index.
type pathElem struct {
	key   string
	index int // >= 0 for an array element; -1 for a key
}

func keyPath(keys ...string) []pathElem {
	p := make([]pathElem, len(keys))
	for i, k := range keys {
		p[i] = pathElem{key: k, index: -1}
	}
	return p
}

func (p pathElem) isIndex() bool { return p.index >= 0 }

func appendKey(p []pathElem, k string) []pathElem {
	return append(p[:len(p):len(p)], pathElem{key: k, index: -1})
}

func appendIndex(p []pathElem, i int) []pathElem {
	return append(p[:len(p):len(p)], pathElem{index: i})
}

// dottedKey renders a path as a.b[1].c.
func dottedKey(p []pathElem) string {
	var b strings.Builder
	for i, e := range p {
		if e.isIndex() {
			b.WriteString("[" + strconv.Itoa(e.index) + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(quoteKey(e.key))
	}
	return b.String()
}

// displayKey renders a path the way the key appears in a file:
// "[agent] credential_sync_timeout", or the bare key at top level.
func displayKey(p []pathElem) string {
	j := len(p) - 1
	for j > 0 && p[j].isIndex() {
		j-- // the key an index belongs to: "[daemon] allow_uids[1]"
	}
	if j <= 0 {
		return dottedKey(p)
	}
	return "[" + dottedKey(p[:j]) + "] " + dottedKey(p[j:])
}

// quoteKey quotes a key that is not a TOML bare key.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(k)
		}
	}
	return k
}

// problems collects errors up to maxErrors.
type problems struct{ errs []*Error }

func (ps *problems) add(kind error, path []pathElem, format string, args ...any) {
	if len(ps.errs) >= maxErrors {
		return
	}
	ps.errs = append(ps.errs, &Error{Key: dottedKey(path), Kind: kind, Msg: fmt.Sprintf(format, args...), path: path})
}

func (ps *problems) err() error {
	switch len(ps.errs) {
	case 0:
		return nil
	case 1:
		return ps.errs[0]
	}
	errs := make([]error, len(ps.errs))
	for i, e := range ps.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}
