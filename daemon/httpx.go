package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"remote/api"
	"remote/internal/errdefs"
)

// MaxBodyBytes bounds every request body (and every chat socket frame).
const MaxBodyBytes = 1 << 20

// requireJSON refuses (415) a request whose body is not declared as
// application/json. A browser can send a cross-site or form-built request
// with text/plain, form or multipart bodies without a preflight, never
// with application/json, so a JSON body that arrives under another type is
// refused rather than parsed. A charset parameter may only say utf-8. A
// request without a body and without a Content-Type passes: callers that
// accept an optional body (fork) read the empty body as "no fields".
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	if ct == "" {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeUnsupportedMediaType, Message: "request body has no Content-Type; send it as Content-Type: application/json"}
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return &Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeUnsupportedMediaType, Message: fmt.Sprintf("Content-Type %q is not accepted; send the body as Content-Type: application/json", ct)}
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return &Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeUnsupportedMediaType, Message: fmt.Sprintf("Content-Type %q: only a charset=utf-8 parameter is accepted", ct)}
		}
	}
	return nil
}

// readBody reads at most MaxBodyBytes of r's body, which must be declared
// as application/json (requireJSON).
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := requireJSON(r); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeBadRequest, Message: fmt.Sprintf("request body is larger than %d bytes", MaxBodyBytes)}
	}
	if err != nil {
		return nil, errdefs.InvalidArgument("read request body: %v", err)
	}
	return data, nil
}

// decodeBody strictly decodes r's JSON body into v (a pointer to a struct):
// at most 1 MiB, exactly one JSON object, every field known (names match
// exactly), values of the right type. Errors are bad_request naming the
// field or the byte offset.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// decodeStrict is decodeBody's decoder for bytes already read (a body or
// a chat socket frame). Invalid UTF-8 is refused before decoding, which
// would otherwise replace it with U+FFFD and accept the result.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errdefs.InvalidArgument("request body is empty; want a JSON object")
	}
	if !utf8.Valid(data) {
		return errdefs.InvalidArgument("invalid UTF-8 at byte %d; JSON must be UTF-8", invalidUTF8At(data))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return decodeError(err)
	}
	if fields == nil {
		return errdefs.InvalidArgument("request body is null; want a JSON object")
	}
	known := jsonFields(reflect.TypeOf(v))
	for name := range fields {
		if !known[name] {
			return errdefs.InvalidArgument("unknown field %q", name)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	return nil
}

// invalidUTF8At returns the offset of the first invalid UTF-8 sequence.
func invalidUTF8At(data []byte) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(data)
}

func decodeError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errdefs.InvalidArgument("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return errdefs.InvalidArgument("field %q: got JSON %s, want %s", typ.Field, typ.Value, typ.Type)
	case errors.As(err, &typ):
		return errdefs.InvalidArgument("request body: got JSON %s, want a JSON object", typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errdefs.InvalidArgument("malformed JSON: unexpected end of input")
	default:
		return errdefs.InvalidArgument("malformed JSON: %v", err)
	}
}

// jsonFields lists the exact JSON names of a struct's fields.
func jsonFields(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = true
	}
	return out
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// writeError is the single mapping from errors to the JSON envelope: 4xx
// are logged at debug, 5xx at error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, body := ToHTTP(err)
	if status >= 500 {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	} else {
		s.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
	}
	_ = writeJSON(w, status, api.ErrorResponse{Error: body})
}

// chatID validates a chat id path value: 4–32 lowercase hex.
func chatID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !validChatID(id) {
		return "", errdefs.InvalidArgument("id: invalid chat id %q (want 4-32 lowercase hex characters)", id)
	}
	return id, nil
}

func validChatID(id string) bool {
	if len(id) < 4 || len(id) > 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// parseSince reads a non-negative seq from a query value ("" = 0).
func parseSince(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errdefs.InvalidArgument("%s: want a non-negative integer, got %q", name, v)
	}
	return n, nil
}

func jsonMarshal(v any) (json.RawMessage, error) { return json.Marshal(v) }

// WriteJSON writes v as JSON with status: for handlers outside this
// package (the project routes).
func WriteJSON(w http.ResponseWriter, status int, v any) error { return writeJSON(w, status, v) }

// DecodeBody decodes r's JSON body strictly into v (Content-Type, size,
// unknown fields, trailing data), answering 400/415 errors: for handlers
// outside this package.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) error { return decodeBody(w, r, v) }
