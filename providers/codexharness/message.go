package codexharness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMalformedMessage classifies an app-server line that is not a valid
// JSON-RPC message (not an object, a bad id, no method and no id...).
var ErrMalformedMessage = errors.New("malformed app-server message")

// MessageKind says which of the JSON-RPC shapes a Message has.
type MessageKind int

// The JSON-RPC message shapes (the "jsonrpc" member is optional on the wire).
const (
	KindNotification MessageKind = iota + 1 // method, no id
	KindRequest                             // method and id: the server asks the client
	KindResponse                            // id and result or error: answers one of our requests
)

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error renders the code and the server's message.
func (e *RPCError) Error() string { return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message) }

// Message is one decoded app-server line.
type Message struct {
	Kind MessageKind
	// ID is the compact JSON text of the id (`0`, `"req-1"`), empty for a
	// notification. It is what InteractionResponse.ID names.
	ID     string
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *RPCError
}

type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method *string         `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// DecodeMessage decodes one line. It accepts exactly the three JSON-RPC
// shapes: a string or number id; a request or notification with a
// non-empty method; a response with a result or an error object.
func DecodeMessage(line []byte) (Message, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Message{}, fmt.Errorf("%w: not a JSON object", ErrMalformedMessage)
	}
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformedMessage, err)
	}
	var m Message
	if len(w.ID) > 0 && !bytes.Equal(w.ID, []byte("null")) {
		id, err := canonicalID(w.ID)
		if err != nil {
			return Message{}, err
		}
		m.ID = id
	}
	switch {
	case w.Method != nil:
		if *w.Method == "" {
			return Message{}, fmt.Errorf("%w: empty method", ErrMalformedMessage)
		}
		m.Method = *w.Method
		m.Params = nonNull(w.Params)
		m.Kind = KindNotification
		if m.ID != "" {
			m.Kind = KindRequest
		}
	case m.ID != "":
		m.Kind = KindResponse
		if e := nonNull(w.Error); e != nil {
			var re RPCError
			if err := json.Unmarshal(e, &re); err != nil {
				return Message{}, fmt.Errorf("%w: response %s: bad error object: %w", ErrMalformedMessage, m.ID, err)
			}
			m.Error = &re
		} else {
			m.Result = nonNull(w.Result)
			if m.Result == nil {
				m.Result = json.RawMessage("null")
			}
		}
	default:
		return Message{}, fmt.Errorf("%w: neither method nor id", ErrMalformedMessage)
	}
	return m, nil
}

func nonNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 || bytes.Equal(r, []byte("null")) {
		return nil
	}
	return r
}

// canonicalID returns the compact JSON text of a string or number id.
func canonicalID(raw json.RawMessage) (string, error) {
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%w: bad id: %w", ErrMalformedMessage, err)
		}
		b, _ := json.Marshal(s)
		return string(b), nil
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("%w: bad id: %w", ErrMalformedMessage, err)
		}
		return n.String(), nil
	default:
		return "", fmt.Errorf("%w: id must be a string or a number", ErrMalformedMessage)
	}
}

// encodeRequest renders a client request or notification (id < 0: none).
func encodeRequest(id int64, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", method, err)
	}
	var b []byte
	if id >= 0 {
		b = fmt.Appendf(nil, `{"method":%q,"id":%d,"params":%s}`, method, id, p)
	} else {
		b = fmt.Appendf(nil, `{"method":%q,"params":%s}`, method, p)
	}
	return append(b, '\n'), nil
}

// encodeResponse answers the server request whose id JSON text is id.
func encodeResponse(id string, result, rpcErr json.RawMessage) []byte {
	var b []byte
	if rpcErr != nil {
		b = fmt.Appendf(nil, `{"id":%s,"error":%s}`, id, compact(rpcErr))
	} else {
		b = fmt.Appendf(nil, `{"id":%s,"result":%s}`, id, compact(result))
	}
	return append(b, '\n')
}

func compact(r json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, r); err != nil {
		return []byte("null")
	}
	return buf.Bytes()
}
