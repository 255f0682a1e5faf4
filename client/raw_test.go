package client_test

import (
	"net"
	"net/http"
	"testing"
)

// startRaw serves h on a Unix socket at path until the test ends.
func startRaw(t *testing.T, path string, h http.Handler) *http.Server {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}
