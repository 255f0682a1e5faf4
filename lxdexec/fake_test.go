package lxdexec

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fakeServer is an in-process stand-in for LXD on a real Unix socket. GET
// /1.0 answers from env; everything else goes to mux.
type fakeServer struct {
	mux  *http.ServeMux
	sock string
	env  map[string]any
	srv  *http.Server
}

func newFake(t *testing.T, env map[string]any, extensions ...string) *fakeServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "lxf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f := &fakeServer{mux: http.NewServeMux(), sock: filepath.Join(dir, "unix.socket"), env: env}
	if f.env == nil {
		f.env = map[string]any{"server": "lxd", "server_version": "5.0.2", "server_clustered": false}
	}
	f.mux.HandleFunc("GET /1.0", func(w http.ResponseWriter, r *http.Request) {
		writeSync(w, map[string]any{"api_extensions": extensions, "api_version": "1.0", "auth": "trusted",
			"config": map[string]any{}, "environment": f.env})
	})
	ln, err := net.Listen("unix", f.sock)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = &http.Server{Handler: f.mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	t.Cleanup(func() { f.srv.Close() })
	return f
}

func (f *fakeServer) client(t *testing.T, opts Options) *Client {
	t.Helper()
	opts.Socket = f.sock
	c, err := Connect(context.Background(), opts)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
}

func writeSync(w http.ResponseWriter, meta any) {
	writeJSON(w, http.StatusOK, map[string]any{"type": "sync", "status": "Success", "status_code": 200,
		"operation": "", "error_code": 0, "error": "", "metadata": meta})
}

func writeAsync(w http.ResponseWriter, op map[string]any) {
	url := "/1.0/operations/" + op["id"].(string)
	w.Header().Set("Location", url)
	writeJSON(w, http.StatusAccepted, map[string]any{"type": "async", "status": "Operation created", "status_code": 100,
		"operation": url, "error_code": 0, "error": "", "metadata": op})
}

func writeError(w http.ResponseWriter, httpStatus, code int, msg string) {
	writeJSON(w, httpStatus, map[string]any{"type": "error", "status": "", "status_code": 0,
		"operation": "", "error_code": code, "error": msg, "metadata": nil})
}

// op builds an operation object.
func op(id string, status int, errText string, meta any) map[string]any {
	names := map[int]string{103: "Running", 200: "Success", 400: "Failure", 401: "Cancelled"}
	return map[string]any{"id": id, "class": "task", "description": "test", "status": names[status],
		"status_code": status, "err": errText, "metadata": meta, "may_cancel": false, "location": "none",
		"resources": map[string]any{}}
}
