// Package eventjson decodes and sizes chat events as the store writes them:
// a decoder exactly equal to encoding/json's for an api.Event, fast for the
// canonical form json.Marshal writes (replay is dominated by decoding), and
// the size estimate a run's byte budget uses.
//
// It builds on api and the standard library only: never the store itself,
// the daemon or anything with state.
package eventjson

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"remote/api"
)

// Unmarshal decodes one event's JSON exactly as json.Unmarshal into an
// api.Event would, but fast for the canonical form the store itself writes
// (json.Marshal output: exact field names, plain integers, no nulls): replay
// is dominated by decoding, and reflection costs several times more. Any
// input outside that form takes json.Unmarshal, so results and errors never
// differ from it (FuzzUnmarshalEvent checks this).
func Unmarshal(data []byte, ev *api.Event) error {
	if fast(data, ev) {
		return nil
	}
	*ev = api.Event{}
	return json.Unmarshal(data, ev)
}

// fast decodes data into ev if it is in the canonical form and reports
// whether it did; on false, ev holds garbage.
func fast(d []byte, ev *api.Event) bool {
	*ev = api.Event{}
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return skipWS(d, i+1) == len(d)
	}
	for {
		ks, ke, next, ok := plainString(d, i)
		if !ok {
			return false
		}
		i = skipWS(d, next)
		if i >= len(d) || d[i] != ':' {
			return false
		}
		if i, ok = field(d, skipWS(d, i+1), d[ks:ke], ev); !ok {
			return false
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return false
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return skipWS(d, i+1) == len(d)
		default:
			return false
		}
	}
}

// field decodes the value at d[i:] into ev's field named key and returns the
// index after it.
func field(d []byte, i int, key []byte, ev *api.Event) (int, bool) {
	var s *string
	var n *int64
	var b *bool
	var raw *json.RawMessage
	switch string(key) {
	case "seq":
		n = &ev.Seq
	case "t":
		n = &ev.T
	case "type":
		s = &ev.Type
	case "turnId":
		s = &ev.TurnID
	case "text":
		s = &ev.Text
	case "messageId":
		s = &ev.MessageID
	case "id":
		s = &ev.ID
	case "name":
		s = &ev.Name
	case "input":
		raw = &ev.Input
	case "output":
		s = &ev.Output
	case "isError":
		b = &ev.IsError
	case "toolName":
		s = &ev.ToolName
	case "subtype":
		s = &ev.Subtype
	case "data":
		raw = &ev.Data
	case "sessionId":
		s = &ev.SessionID
	case "provider":
		s = &ev.Provider
	case "usage":
		raw = &ev.Usage
	case "message":
		s = &ev.Message
	case "running":
		b = &ev.Running
	case "native":
		raw = &ev.Native
	case "interactionId":
		s = &ev.InteractionID
	case "status":
		s = &ev.Status
	case "synthetic":
		s = &ev.Synthetic
	case "snapshot":
		s = &ev.Snapshot
	case "project":
		s = &ev.Project
	default:
		return 0, false // unknown, or matched case-insensitively by encoding/json
	}
	switch {
	case s != nil:
		return stringValue(d, i, s)
	case n != nil:
		return intValue(d, i, n)
	case b != nil:
		return boolValue(d, i, b)
	default:
		return rawValue(d, i, raw)
	}
}

func stringValue(d []byte, i int, s *string) (int, bool) {
	if ks, ke, next, ok := plainString(d, i); ok {
		*s = string(d[ks:ke])
		return next, true
	}
	// Escapes or non-ASCII: let encoding/json unquote this one token.
	end := stringEnd(d, i)
	if end < 0 || json.Unmarshal(d[i:end], s) != nil {
		return 0, false
	}
	return end, true
}

func intValue(d []byte, i int, n *int64) (int, bool) {
	j := i
	if j < len(d) && d[j] == '-' {
		j++
	}
	start := j
	for j < len(d) && d[j] >= '0' && d[j] <= '9' {
		j++
	}
	if j == start || (d[start] == '0' && j-start > 1) || (j < len(d) && !isDelim(d[j])) {
		return 0, false // fractions, exponents, leading zeros: encoding/json decides
	}
	v, err := strconv.ParseInt(string(d[i:j]), 10, 64)
	if err != nil {
		return 0, false
	}
	*n = v
	return j, true
}

func boolValue(d []byte, i int, b *bool) (int, bool) {
	switch {
	case hasLiteral(d, i, "true"):
		*b = true
		return i + 4, true
	case hasLiteral(d, i, "false"):
		*b = false
		return i + 5, true
	}
	return 0, false
}

func hasLiteral(d []byte, i int, lit string) bool {
	end := i + len(lit)
	return end <= len(d) && string(d[i:end]) == lit && (end == len(d) || isDelim(d[end]))
}

func rawValue(d []byte, i int, raw *json.RawMessage) (int, bool) {
	end, ok := valueEnd(d, i)
	if !ok || d[i] == 'n' || !json.Valid(d[i:end]) {
		return 0, false // null and anything invalid: encoding/json decides
	}
	*raw = append(json.RawMessage(nil), d[i:end]...)
	return end, true
}

// plainString scans the JSON string starting at d[i] == '"' that needs no
// unquoting (no escapes, no control bytes, only ASCII or valid UTF-8). It
// returns the bounds of its content and the index after the closing quote.
func plainString(d []byte, i int) (start, end, next int, ok bool) {
	if i >= len(d) || d[i] != '"' {
		return 0, 0, 0, false
	}
	ascii := true
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(d[i+1:j]) {
				return 0, 0, 0, false
			}
			return i + 1, j, j + 1, true
		case c == '\\' || c < 0x20:
			return 0, 0, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, 0, 0, false
}

// stringEnd returns the index after the JSON string token at d[i], or -1.
func stringEnd(d []byte, i int) int {
	if i >= len(d) || d[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(d); j++ {
		switch d[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd finds where the JSON value at d[i] ends, by bracket depth and
// string boundaries only; the caller validates the slice.
func valueEnd(d []byte, i int) (int, bool) {
	if i >= len(d) {
		return 0, false
	}
	switch d[i] {
	case '"':
		e := stringEnd(d, i)
		return e, e > 0
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				e := stringEnd(d, j)
				if e < 0 {
					return 0, false
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, true
				}
			}
		}
		return 0, false
	}
	j := i
	for j < len(d) && !isDelim(d[j]) {
		j++
	}
	return j, j > i
}

func isDelim(c byte) bool {
	return c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r'
}

func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// Size approximates the stored size of ev (its JSON without seq):
// the variable fields plus a fixed allowance for keys and framing, for a
// run's byte budget, without encoding it.
func Size(ev api.Event) int64 {
	n := 48 + len(ev.Type)
	for _, f := range []string{ev.TurnID, ev.Text, ev.MessageID, ev.ID, ev.Name, ev.Output, ev.ToolName, ev.Subtype,
		ev.SessionID, ev.Provider, ev.Message, ev.InteractionID, ev.Status} {
		if f != "" {
			n += len(f) + 16
		}
	}
	for _, f := range [][]byte{ev.Input, ev.Data, ev.Usage, ev.Native} {
		if len(f) > 0 {
			n += len(f) + 12
		}
	}
	return int64(n)
}
