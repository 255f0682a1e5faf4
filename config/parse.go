package config

import (
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// maxFileBytes bounds the configuration file Load reads.
const maxFileBytes = 1 << 20

// Load reads the file at path and returns Parse's result for it.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("open config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("read config %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return Config{}, &Error{File: path, Kind: ErrInvalidValue, Msg: fmt.Sprintf("file larger than %d bytes", maxFileBytes)}
	}
	return Parse(path, data)
}

// Parse decodes data (named name in errors) over Default and validates the
// result. Decoding is strict: an unknown key, a value of the wrong type or
// a value Validate rejects is an *Error naming name, the line and the key;
// several problems are joined (errors.Join), in file order, at most 20.
// Every key is optional.
func Parse(name string, data []byte) (Config, error) {
	text := string(data)
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		e := &Error{File: name, Kind: ErrSyntax, Msg: "invalid TOML"}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			e.Line = pe.Position.Line
			e.Msg = pe.Message
		}
		return Config{}, e
	}

	var ps problems
	checkValue(&ps, nil, raw, configType)
	if len(ps.errs) > 0 {
		return Config{}, locate(name, text, raw, &ps)
	}

	cfg := Default()
	if _, err := toml.Decode(text, &cfg); err != nil {
		// checkValue accepted every value, so this is a schema the checker
		// does not know about; report it without a line.
		return Config{}, &Error{File: name, Kind: ErrInvalidValue, Msg: err.Error()}
	}
	cfg.fillProviderDefaults()
	cfg.fillForgeDefaults()
	if cfg.Version == 0 {
		cfg.Version = Version
	}

	if err := cfg.validate(&ps); err != nil {
		return Config{}, locate(name, text, raw, &ps)
	}
	return cfg, nil
}

// fillProviderDefaults gives a provider named in the file, which TOML
// decoding started from zero, the default binary when it sets none.
func (c *Config) fillProviderDefaults() {
	for id, p := range c.Providers {
		if p.Binary == "" {
			p.Binary = defaultBinaries[id]
			c.Providers[id] = p
		}
	}
}

// locate sets File and Line on every collected problem, sorts them by line
// and returns them as one error.
func locate(name, text string, raw map[string]any, ps *problems) error {
	for _, e := range ps.errs {
		e.File = name
		e.Line = keyLine(text, raw, e.path)
	}
	sort.SliceStable(ps.errs, func(i, j int) bool {
		li, lj := ps.errs[i].Line, ps.errs[j].Line
		if li == 0 || lj == 0 {
			return li != 0 && lj == 0
		}
		return li < lj
	})
	return ps.err()
}

var (
	configType   = reflect.TypeFor[Config]()
	durationType = reflect.TypeFor[Duration]()
	sizeType     = reflect.TypeFor[Size]()
	// textUnmarshalerType marks schema types decoded from TOML strings.
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkValue checks a decoded TOML value v against the Go type t of the
// schema, recording unknown keys and type mismatches. It never records the
// value itself except for durations, which are not secret.
func checkValue(ps *problems, path []pathElem, v any, t reflect.Type) {
	if t == sizeType {
		var z Size
		if err := z.UnmarshalTOML(v); err != nil {
			ps.add(ErrInvalidValue, path, "%s", err.Error())
		}
		return
	}
	if t == durationType {
		s, ok := v.(string)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be a duration string such as \"30s\", not %s", tomlType(v))
			return
		}
		if _, err := time.ParseDuration(s); err != nil {
			ps.add(ErrInvalidValue, path, "invalid duration %q", s)
		}
		return
	}
	if t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(textUnmarshalerType) {
		// Text-decoded values (e.g. FileMode) are strings checked by
		// their own UnmarshalText; its message names the bad value.
		str, ok := v.(string)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be a string, not %s", tomlType(v))
			return
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(str)); err != nil {
			ps.add(ErrInvalidValue, path, "%s", err.Error())
		}
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		checkValue(ps, path, v, t.Elem())
	case reflect.String:
		if _, ok := v.(string); !ok {
			ps.add(ErrInvalidValue, path, "must be a string, not %s", tomlType(v))
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			ps.add(ErrInvalidValue, path, "must be true or false, not %s", tomlType(v))
		}
	case reflect.Int:
		n, ok := v.(int64)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be an integer, not %s", tomlType(v))
		} else if int64(int(n)) != n {
			ps.add(ErrInvalidValue, path, "integer out of range")
		}
	case reflect.Slice:
		elems, ok := arrayElems(v)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be an array, not %s", tomlType(v))
			return
		}
		for i, el := range elems {
			checkValue(ps, appendIndex(path, i), el, t.Elem())
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be a table, not %s", tomlType(v))
			return
		}
		for _, k := range sortedKeys(m) {
			checkValue(ps, appendKey(path, k), m[k], t.Elem())
		}
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			ps.add(ErrInvalidValue, path, "must be a table, not %s", tomlType(v))
			return
		}
		for _, k := range sortedKeys(m) {
			f, ok := fieldByTag(t, k)
			if !ok {
				ps.add(ErrUnknownKey, appendKey(path, k), "unknown key")
				continue
			}
			checkValue(ps, appendKey(path, k), m[k], f.Type)
		}
	default:
		ps.add(ErrInvalidValue, path, "unsupported schema type %s", t)
	}
}

// fieldByTag finds the field whose toml tag is exactly key. Unlike the toml
// decoder it does not fold case: "Socket" is an unknown key, not "socket".
func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			// Embedded structs' keys sit in the outer table, as the
			// toml decoder reads them.
			if inner, ok := fieldByTag(f.Type, key); ok {
				return inner, true
			}
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == key && name != "" && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func arrayElems(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case []map[string]any:
		out := make([]any, len(a))
		for i := range a {
			out[i] = a[i]
		}
		return out, true
	}
	return nil, false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tomlType names a decoded value's TOML type for messages.
func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "a date-time" // the only other TOML values

}

// keyLine finds the 1-based line where path is set in text, or 0.
//
// The toml package keeps key positions private but reports the position of
// the key being decoded when an Unmarshaler fails. keyLine decodes text into
// a struct built for path alone, ending in a probe that always fails, and
// reads the position off the error. Array elements are different: the
// toml package keeps one position per key for all [[t]] tables, so the n-th
// [[t]] header is looked up in the text instead.
func keyLine(text string, raw map[string]any, path []pathElem) int {
	for i, e := range path {
		if !e.isIndex() {
			continue
		}
		if line := arrayTableLine(text, path[:i], e.index); line > 0 {
			return line
		}
		path = path[:i] // an inline array: the line of its key
		break
	}
	for len(path) > 0 && lookup(raw, path) == nil {
		path = path[:len(path)-1] // a default that failed validation: its table
	}
	return probeLine(text, raw, path, 0)
}

// probeLine returns the line of the key at path. A table implied only by
// dotted keys (a.b.c = 1) has no position of its own; the line of its first
// key stands for it.
func probeLine(text string, raw map[string]any, path []pathElem, depth int) int {
	if len(path) == 0 || depth > 8 {
		return 0
	}
	t := reflect.TypeFor[positionProbe]()
	for i := len(path) - 1; i >= 0; i-- {
		if strings.ContainsAny(path[i].key, ",\"`\\") || path[i].key == "-" || path[i].key == "" {
			return 0 // cannot be expressed as a struct tag
		}
		t = reflect.StructOf([]reflect.StructField{{
			Name: "F",
			Type: t,
			Tag:  reflect.StructTag(`toml:"` + path[i].key + `"`),
		}})
	}
	_, err := toml.Decode(text, reflect.New(t).Interface())
	// The text decoded before, so the only ParseError left is the probe's.
	var pe toml.ParseError
	if errors.As(err, &pe) && pe.Position.Line > 0 {
		return pe.Position.Line
	}
	if m, ok := lookup(raw, path).(map[string]any); ok {
		for _, k := range sortedKeys(m) {
			if line := probeLine(text, raw, appendKey(path, k), depth+1); line > 0 {
				return line
			}
		}
	}
	return 0
}

// lookup returns the raw value at path, or nil.
func lookup(raw map[string]any, path []pathElem) any {
	var cur any = raw
	for _, e := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = m[e.key]; !ok {
			return nil
		}
	}
	return cur
}

// arrayTableLine returns the line of the n-th (0-based) [[table]] header
// for the table path, or 0.
func arrayTableLine(text string, table []pathElem, n int) int {
	parts := make([]string, len(table))
	for i, e := range table {
		if e.isIndex() {
			return 0
		}
		parts[i] = regexp.QuoteMeta(e.key)
	}
	re := regexp.MustCompile(`^[ \t]*\[\[[ \t]*` + strings.Join(parts, `[ \t]*\.[ \t]*`) + `[ \t]*\]\]`)
	seen := 0
	for i, line := range strings.Split(text, "\n") {
		if re.MatchString(line) {
			if seen == n {
				return i + 1
			}
			seen++
		}
	}
	return 0
}

var errProbe = errors.New("position probe")

// positionProbe fails to decode so that the toml package reports where the
// key it stands for is.
type positionProbe struct{}

// UnmarshalTOML always fails with errProbe.
func (*positionProbe) UnmarshalTOML(any) error { return errProbe }
