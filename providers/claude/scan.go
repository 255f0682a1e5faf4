package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// A small validating JSON scanner. encoding/json decodes a stream-json line
// at a few tens of MB/s; the parser needs only a handful of top-level
// fields of each line, so it walks the object once, validating as it goes,
// and hands out raw value spans. Only the rarer records (assistant, user,
// result) are decoded further with encoding/json.

var errSyntax = errors.New("invalid JSON")

// maxDepth bounds nesting like encoding/json does.
const maxDepth = 10000

type scanner struct {
	data  []byte
	pos   int
	depth int
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.pos)
}

// value skips one JSON value, validating it.
func (s *scanner) value() error {
	s.ws()
	if s.pos >= len(s.data) {
		return s.fail("unexpected end")
	}
	switch c := s.data[s.pos]; {
	case c == '"':
		_, _, err := s.str()
		return err
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.fail("unexpected character")
	}
}

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if s.digits() == 0 {
		return s.fail("invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.fail("invalid number")
		}
	}
	return nil
}

// str scans a string at s.pos and returns its raw contents (between the
// quotes) and whether it is plain: no escapes and only ASCII, so its bytes
// are its value.
func (s *scanner) str() (raw []byte, plain bool, err error) {
	s.pos++ // opening quote
	start := s.pos
	plain = true
	for {
		// Fast path: run to the next byte that needs a look.
		rest := s.data[s.pos:]
		i := 0
		for i < len(rest) && strSafe[rest[i]] {
			i++
		}
		s.pos += i
		if s.pos >= len(s.data) {
			return nil, false, s.fail("unterminated string")
		}
		switch c := s.data[s.pos]; {
		case c == '"':
			raw = s.data[start:s.pos]
			s.pos++
			return raw, plain, nil
		case c == '\\':
			plain = false
			s.pos++
			if s.pos >= len(s.data) {
				return nil, false, s.fail("unterminated string")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				if len(s.data)-s.pos < 5 {
					return nil, false, s.fail("invalid escape")
				}
				for _, h := range s.data[s.pos+1 : s.pos+5] {
					if !isHex(h) {
						return nil, false, s.fail("invalid escape")
					}
				}
				s.pos += 5
			default:
				return nil, false, s.fail("invalid escape")
			}
		case c < 0x20:
			return nil, false, s.fail("control character in string")
		default: // >= 0x80: invalid UTF-8 is replaced when decoding
			plain = false
			s.pos++
		}
	}
}

// strSafe marks the bytes a string scan passes without a closer look.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail("nesting too deep")
	}
	return nil
}

func (s *scanner) array() error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // [
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unterminated array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.depth--
			return nil
		default:
			return s.fail("expected , or ]")
		}
	}
}

// object scans an object at s.pos, calling fn (when non-nil) with each
// member's raw key contents and raw value.
func (s *scanner) object(fn func(key []byte, plainKey bool, val []byte) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	s.pos++ // {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("expected object key")
		}
		key, plainKey, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("expected :")
		}
		s.pos++
		s.ws()
		start := s.pos
		if err := s.value(); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(key, plainKey, s.data[start:s.pos]); err != nil {
				return err
			}
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unterminated object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			s.depth--
			return nil
		default:
			return s.fail("expected , or }")
		}
	}
}

// walkObject validates that data is exactly one JSON object and calls fn
// for each of its members, with keys decoded. key and val alias data
// unless the key needed unescaping.
func walkObject(data []byte, fn func(key, val []byte) error) error {
	s := scanner{data: data}
	s.ws()
	if s.pos >= len(data) {
		return s.fail("empty input")
	}
	if data[s.pos] != '{' {
		if err := s.value(); err != nil {
			return err
		}
		return fmt.Errorf("%w: not an object", errNotObject)
	}
	err := s.object(func(key []byte, plainKey bool, val []byte) error {
		if !plainKey {
			var dk string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &dk) != nil {
				return s.fail("invalid key")
			}
			key = []byte(dk)
		}
		return fn(key, val)
	})
	if err != nil {
		return err
	}
	s.ws()
	if s.pos != len(data) {
		return s.fail("data after the object")
	}
	return nil
}

var errNotObject = errors.New("JSON value")

// errType reports a field whose JSON type is not the expected one.
type errType struct{ field, want string }

func (e errType) Error() string { return fmt.Sprintf("field %s is not %s", e.field, e.want) }

// jsonString decodes a raw JSON string value; null gives "".
func jsonString(field string, raw []byte) (string, error) {
	if len(raw) == 0 || raw[0] != '"' {
		if string(raw) == "null" {
			return "", nil
		}
		return "", errType{field, "a string"}
	}
	inner := raw[1 : len(raw)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("field %s: %w", field, err)
	}
	return out, nil
}

// jsonStringLike is jsonString, but returns the equal one of known
// without allocating when the value is a plain string matching it.
func jsonStringLike(field string, raw []byte, known ...string) (string, error) {
	if len(raw) >= 2 && raw[0] == '"' {
		inner := raw[1 : len(raw)-1]
		if bytes.IndexByte(inner, '\\') < 0 {
			for _, k := range known {
				if k != "" && string(inner) == k {
					return k, nil
				}
			}
		}
	}
	return jsonString(field, raw)
}

func jsonBool(field string, raw []byte) (bool, error) {
	switch string(raw) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, errType{field, "a boolean"}
}

func jsonInt(field string, raw []byte) (int64, error) {
	if string(raw) == "null" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return n, nil
	}
	f, err := jsonFloat(field, raw)
	if err != nil {
		return 0, errType{field, "an integer"}
	}
	return int64(f), nil
}

func jsonFloat(field string, raw []byte) (float64, error) {
	if string(raw) == "null" {
		return 0, nil
	}
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, errType{field, "a number"}
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, errType{field, "a number"}
	}
	return f, nil
}

// walkArray validates that data is one JSON array and calls fn with each
// element's raw value.
func walkArray(data []byte, fn func(val []byte) error) error {
	s := scanner{data: data}
	s.ws()
	if s.pos >= len(data) || data[s.pos] != '[' {
		return errType{"value", "an array"}
	}
	s.pos++
	s.depth++
	s.ws()
	if s.pos < len(data) && data[s.pos] == ']' {
		s.pos++
	} else {
		for {
			s.ws()
			start := s.pos
			if err := s.value(); err != nil {
				return err
			}
			if err := fn(data[start:s.pos]); err != nil {
				return err
			}
			s.ws()
			if s.pos >= len(data) {
				return s.fail("unterminated array")
			}
			if data[s.pos] == ']' {
				s.pos++
				break
			}
			if data[s.pos] != ',' {
				return s.fail("expected , or ]")
			}
			s.pos++
		}
	}
	s.ws()
	if s.pos != len(data) {
		return s.fail("data after the array")
	}
	return nil
}
