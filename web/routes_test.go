package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"remote/api"
)

// TestRouteTableMisses: what neither origin's route table serves answers
// with the JSON envelope: 405 naming the allowed methods for a path served
// for others (the preview's token exchange is never proxied to the app),
// 404 for a path nothing serves, a subtree's root included ("/v1" is not
// redirected to the proxy).
func TestRouteTableMisses(t *testing.T) {
	s, err := New(Options{Socket: "/nonexistent.sock", PreviewURL: "http://*.localhost:8081"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		preview      bool
		method, path string
		status       int
		code, allow  string
	}{
		{false, "PUT", "/login", 405, api.CodeBadRequest, "GET, HEAD, POST"},
		{false, "GET", "/logout", 405, api.CodeBadRequest, "POST"},
		{false, "POST", "/", 405, api.CodeBadRequest, "GET, HEAD"},
		{false, "DELETE", "/static/app.js", 405, api.CodeBadRequest, "GET, HEAD"},
		{false, "POST", "/preview/p/3000", 405, api.CodeBadRequest, "GET, HEAD"},
		{false, "GET", "/v1", 404, api.CodeNotFound, ""},
		{false, "GET", "/ws", 404, api.CodeNotFound, ""},
		{false, "GET", "/static", 404, api.CodeNotFound, ""},
		{false, "GET", "/nope", 404, api.CodeNotFound, ""},
		{true, "POST", "/.remote-preview/enter", 405, api.CodeBadRequest, "GET, HEAD"},
		{true, "POST", "/.remote-preview/session", 405, api.CodeBadRequest, "GET, HEAD"},
		{false, "POST", "/preview/confirm", 405, api.CodeBadRequest, "GET, HEAD"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(c.method, "http://127.0.0.1:8081"+c.path, nil)
		if c.preview {
			req.Host = "8080-0123456789abcdef.localhost:8081"
			s.PreviewHandler().ServeHTTP(rec, req)
		} else {
			s.ServeHTTP(rec, req)
		}
		var e api.ErrorResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Errorf("%s %s: body %q is not the JSON envelope: %v", c.method, c.path, rec.Body, err)
		}
		if rec.Code != c.status || e.Error.Code != c.code || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d %q Allow %q, want %d %q Allow %q", c.method, c.path, rec.Code, e.Error.Code, rec.Header().Get("Allow"), c.status, c.code, c.allow)
		}
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "http://127.0.0.1/login", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("HEAD /login: %d, want 200", rec.Code)
	}
}
