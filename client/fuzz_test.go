package client

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
)

// FuzzDecodeError: any error answer becomes a *Error with a code and a
// message, whatever its body.
func FuzzDecodeError(f *testing.F) {
	f.Add(404, []byte(`{"error":{"code":"not_found","message":"chat \"abc\" not found"}}`))
	f.Add(500, []byte(`internal server error`))
	f.Add(409, []byte(`{"error":{}}`))
	f.Add(503, []byte(``))
	f.Add(400, []byte(`{"error":{"code":"bad_request","message":"x"}} trailing`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 400 || status > 599 {
			return
		}
		err := decodeError(&http.Response{StatusCode: status, Body: io.NopCloser(bytes.NewReader(body))})
		var e *Error
		if !errors.As(err, &e) || e.Code == "" || e.Status != status || e.Message == "" {
			t.Fatalf("decodeError(%d, %q) = %#v", status, body, err)
		}
	})
}

// FuzzEventStream: a stream of arbitrary bytes yields events or an error,
// never a panic, and stops.
func FuzzEventStream(f *testing.F) {
	f.Add([]byte("{\"seq\":1,\"type\":\"user\",\"text\":\"hi\"}\n{\"type\":\"sync\",\"running\":true}\n"))
	f.Add([]byte("\n\n{\"type\":\"complete\"}"))
	f.Add([]byte("{\"type\":"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		st := &EventStream{body: io.NopCloser(bytes.NewReader(body)), lines: newLineReader(bytes.NewReader(body))}
		for i := 0; ; i++ {
			if i > len(body)+1 {
				t.Fatalf("more events than bytes")
			}
			if _, err := st.Next(); err != nil {
				return
			}
		}
	})
}
