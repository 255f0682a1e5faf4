package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// DocTag is the struct tag that gives every configuration key its one-line
// comment: the line above the key in DefaultTOML's output and in
// docs/config.md. A field with a toml tag and no doc tag is an error.
const DocTag = "doc"

// KeyDoc is one key of the schema: its TOML path (array elements' keys
// read "a.b[].c"), the Go field that holds it and its comment.
type KeyDoc struct {
	Path  string
	Field string
	Doc   string
}

// Keys walks the schema and returns every key in the order DefaultTOML
// prints them, with its doc tag ("" when the field has none).
func Keys() []KeyDoc { return keys(configType) }

func keys(t reflect.Type) []KeyDoc {
	var out []KeyDoc
	walkKeys(t, "", func(path string, owner reflect.Type, f reflect.StructField) {
		out = append(out, KeyDoc{Path: path, Field: owner.Name() + "." + f.Name, Doc: f.Tag.Get(DocTag)})
	})
	return out
}

// MissingDoc returns an error naming every key without a doc tag and
// saying how to add one, or nil.
func MissingDoc() error { return missingDoc(configType) }

func missingDoc(t reflect.Type) error {
	var lines []string
	for _, k := range keys(t) {
		if strings.TrimSpace(k.Doc) == "" {
			lines = append(lines, fmt.Sprintf("  key %s (field %s in package config) has no comment", k.Path, k.Field))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New("configuration keys without a comment:\n" + strings.Join(lines, "\n") +
		"\nadd to each field a one-line tag `" + DocTag + `:"..."` + "` beside its toml tag, e.g.\n" +
		"  Foo string `toml:\"foo\" " + DocTag + ":\"what foo does; what empty means\"`\n" +
		"(no double quotes or backquotes inside), then regenerate docs/config.md:\n" +
		"  REMOTE_UPDATE_DOCS=1 go test ./internal/docscheck -run TestConfigReference")
}

// walkKeys calls fn for every key of struct type t under the dotted path
// prefix, descending into tables, maps of tables ("<id>" stands for the
// map key) and arrays of tables ("[]").
func walkKeys(t reflect.Type, prefix string, fn func(path string, owner reflect.Type, f reflect.StructField)) {
	for _, f := range fields(t) {
		path := joinKey(prefix, tomlName(f))
		fn(path, t, f)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case isLeaf(ft):
		case ft.Kind() == reflect.Struct:
			walkKeys(ft, path, fn)
		case ft.Kind() == reflect.Map && isTable(ft.Elem()):
			walkKeys(ft.Elem(), path+".<id>", fn)
		case ft.Kind() == reflect.Slice && isTable(ft.Elem()):
			walkKeys(ft.Elem(), path+"[]", fn)
		}
	}
}

// fields returns t's keyed fields in order, with embedded structs' fields
// in place of the embedded field (their keys sit in the outer table).
func fields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			for _, inner := range fields(f.Type) {
				inner.Index = append([]int{i}, inner.Index...)
				out = append(out, inner)
			}
			continue
		}
		if name := tomlName(f); name != "" && name != "-" && f.IsExported() {
			out = append(out, f)
		}
	}
	return out
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return name
}

func joinKey(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

var textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()

// isLeaf reports whether values of t are written as one TOML value (a
// string form such as Duration or Size, or a scalar).
func isLeaf(t reflect.Type) bool {
	return t.Implements(textMarshalerType) || t.Kind() != reflect.Struct && t.Kind() != reflect.Map && t.Kind() != reflect.Slice
}

// isTable reports whether t is a struct written as a TOML table.
func isTable(t reflect.Type) bool { return t.Kind() == reflect.Struct && !isLeaf(t) }

// DefaultTOML returns the complete default configuration (Default) as
// TOML, every key under a one-line comment from its doc tag: what
// remoted -print-default-config prints and docs/config.md shows. Parsing
// it gives Default back. It fails when a key has no doc tag.
func DefaultTOML() ([]byte, error) {
	if err := MissingDoc(); err != nil {
		return nil, err
	}
	w := &tomlWriter{}
	w.printf("# remoted's complete default configuration (remoted -print-default-config).\n")
	w.printf("# Every key is optional: a file sets only the keys it changes. A key shown\n")
	w.printf("# commented out is unset; its comment says what unset means.\n")
	w.table(nil, reflect.ValueOf(Default()), true)
	return w.buf.Bytes(), w.err
}

type tomlWriter struct {
	buf bytes.Buffer
	err error
}

func (w *tomlWriter) printf(format string, args ...any) { fmt.Fprintf(&w.buf, format, args...) }

// table writes the keys of struct v (its plain values first, then its
// sub-tables, as TOML requires) under the table path; with docs every key
// gets its comment.
func (w *tomlWriter) table(path []string, v reflect.Value, docs bool) {
	var sub []reflect.StructField
	for _, f := range fields(v.Type()) {
		fv := v.FieldByIndex(f.Index)
		ft := f.Type
		if ft.Kind() == reflect.Struct && !isLeaf(ft) || ft.Kind() == reflect.Map && isTable(ft.Elem()) {
			sub = append(sub, f)
			continue
		}
		if docs {
			w.comment(f)
		}
		if isUnset(fv) {
			// Unset has a meaning of its own (the doc says which, and
			// an empty list may be refused); show the key commented out.
			w.printf("#%s = %s\n", tomlKey(tomlName(f)), w.value(fv))
			continue
		}
		w.printf("%s = %s\n", tomlKey(tomlName(f)), w.value(fv))
	}
	for _, f := range sub {
		fv := v.FieldByIndex(f.Index)
		p := append(slices.Clone(path), tomlName(f))
		if f.Type.Kind() == reflect.Struct {
			w.printf("\n")
			w.comment(f)
			w.printf("[%s]\n", joinPath(p))
			w.table(p, fv, docs)
			continue
		}
		w.printf("\n")
		w.comment(f)
		keys := mapKeys(fv, p)
		if len(keys) == 0 && docs {
			// No table to show the keys in: list them.
			for _, ef := range fields(f.Type.Elem()) {
				w.printf("#   %s: %s\n", tomlName(ef), ef.Tag.Get(DocTag))
			}
		}
		for i, k := range keys {
			kp := append(slices.Clone(p), k)
			if i > 0 {
				w.printf("\n# the same keys as [%s]\n", joinPath(append(slices.Clone(p), keys[0])))
			}
			w.printf("[%s]\n", joinPath(kp))
			w.table(kp, fv.MapIndex(reflect.ValueOf(k)), docs && i == 0)
		}
	}
}

// mapKeys orders a map of tables: providers in display order, else sorted.
func mapKeys(m reflect.Value, path []string) []string {
	var keys []string
	for _, k := range m.MapKeys() {
		keys = append(keys, k.String())
	}
	sort.Strings(keys)
	if joinPath(path) == "providers" {
		slices.SortStableFunc(keys, func(a, b string) int {
			return slices.Index(providerIDs, a) - slices.Index(providerIDs, b)
		})
	}
	return keys
}

// comment writes f's doc line and, for an array of tables, one line per
// key of its elements.
func (w *tomlWriter) comment(f reflect.StructField) {
	w.printf("# %s\n", f.Tag.Get(DocTag))
	if f.Type.Kind() == reflect.Slice && isTable(f.Type.Elem()) {
		for _, ef := range fields(f.Type.Elem()) {
			w.printf("#   %s: %s\n", tomlName(ef), ef.Tag.Get(DocTag))
		}
	}
}

// value writes v as one TOML value: inline arrays and inline tables for
// slices, maps and structs.
func (w *tomlWriter) value(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return w.value(reflect.Zero(v.Type().Elem()))
		}
		return w.value(v.Elem())
	}
	if tm, ok := v.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		if err != nil && w.err == nil {
			w.err = err
		}
		return quote(string(b))
	}
	switch v.Kind() {
	case reflect.String:
		return quote(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = w.value(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = tomlKey(k.String()) + " = " + w.value(v.MapIndex(k))
		}
		return inline(parts)
	case reflect.Struct:
		var parts []string
		for _, f := range fields(v.Type()) {
			fv := v.FieldByIndex(f.Index)
			if isUnset(fv) {
				continue
			}
			parts = append(parts, tomlKey(tomlName(f))+" = "+w.value(fv))
		}
		return inline(parts)
	}
	if w.err == nil {
		w.err = fmt.Errorf("config: no TOML form for %s", v.Type())
	}
	return `""`
}

// isUnset reports whether v is a nil pointer, slice or map: a key left out.
func isUnset(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map:
		return v.IsNil()
	}
	return false
}

func inline(parts []string) string {
	if len(parts) == 0 {
		return "{}"
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

func joinPath(p []string) string {
	q := make([]string, len(p))
	for i, k := range p {
		q[i] = tomlKey(k)
	}
	return strings.Join(q, ".")
}

// tomlKey writes a bare key when TOML allows one, else a quoted key.
func tomlKey(k string) string {
	if quoteKey(k) == k {
		return k
	}
	return quote(k)
}

// quote writes s as a TOML basic string.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
