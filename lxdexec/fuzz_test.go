package lxdexec

import (
	"bytes"
	"errors"
	"testing"
)

func FuzzDecodeResponse(f *testing.F) {
	f.Add(200, []byte(`{"type":"sync","status":"Success","status_code":200,"operation":"","error_code":0,"error":"","metadata":{}}`+"\n"))
	f.Add(202, []byte(`{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/a","error_code":0,"error":"","metadata":{"id":"a","status_code":103}}`))
	f.Add(404, []byte(`{"type":"error","status":"","status_code":0,"operation":"","error_code":404,"error":"Instance not found","metadata":null}`+"\n\n"))
	f.Add(200, []byte(`{"type":"error","error_code":400,"error":"context deadline exceeded"}`))
	f.Add(404, []byte("404 page not found\n"))
	f.Add(500, []byte(""))
	f.Add(200, []byte(`{"type":"sync","metadata":["/1.0/instances/a"]}{"trailing":1}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		r, err := decodeResponse("GET", "/1.0/x", status, bytes.NewReader(body))
		if err == nil && r == nil {
			t.Fatal("nil response without error")
		}
		var lerr *Error
		if errors.As(err, &lerr) && lerr.Error() == "" {
			t.Fatal("empty error text")
		}
		if err == nil && r.Type != "sync" && r.Type != "async" {
			t.Fatalf("accepted type %q", r.Type)
		}
	})
}

func FuzzDecodeOperation(f *testing.F) {
	f.Add([]byte(`{"id":"a0b92d12","class":"task","description":"Creating instance","created_at":"2026-12-02T13:58:46.175829063Z","status":"Running","status_code":103,"resources":{"instances":["/1.0/instances/p"]},"metadata":null,"may_cancel":false,"err":"","location":"none"}`))
	f.Add([]byte(`{"id":"x","status_code":400,"err":"Command not found","metadata":{"return":127},"err_code":404,"requestor":{}}`))
	f.Add([]byte(`{"id":"x","resources":{}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		op, err := decodeOperation(raw)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
			return
		}
		if op.ID == "" {
			t.Fatal("operation without id accepted")
		}
		if op.Final() {
			_ = opError("/1.0/operations/"+op.ID, op)
		}
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"lifecycle","timestamp":"2026-12-02T13:59:16.100451807Z","metadata":{"action":"instance-started","source":"/1.0/instances/probe-a","requestor":{"username":"root","protocol":"unix","address":"@"}},"location":"none","project":"default"}`))
	f.Add([]byte(`{"type":"lifecycle","metadata":{"action":"instance-deleted","source":"/1.0/instances/b?project=p","name":"b","project":"p"}}`))
	f.Add([]byte(`{"type":"operation","metadata":{"id":"x","status_code":200}}`))
	f.Add([]byte(`{"type":"logging","metadata":{"message":"Started container","level":"info","context":{"instance":"a"}}}`))
	f.Add([]byte(`{"type":"lifecycle","metadata":{"source":"%zz"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ev, err := decodeEvent(raw)
		if err != nil {
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("error %v is not ErrProtocol", err)
			}
			return
		}
		if ev.Type == "" {
			t.Fatal("event without type accepted")
		}
	})
}

func FuzzParseOctalMode(f *testing.F) {
	for _, s := range []string{"0644", "0750", "04755", "0777", "640", "0o640", "", "99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseOctalMode(s)
		if err != nil {
			return
		}
		back, err := parseOctalMode(octalMode(m))
		if err != nil || back != m {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, m, octalMode(m), back, err)
		}
	})
}
