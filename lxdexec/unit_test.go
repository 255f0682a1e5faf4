package lxdexec

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

func TestDecodeResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		wantType string
		wantErr  error
		wantCode int
	}{
		{"sync", 200, `{"type":"sync","status":"Success","status_code":200,"metadata":{"a":1}}` + "\n", "sync", nil, 0},
		{"async", 202, `{"type":"async","status_code":100,"operation":"/1.0/operations/x","metadata":{"id":"x"}}`, "async", nil, 0},
		{"not found", 404, `{"type":"error","error_code":404,"error":"Instance not found"}` + "\n\n", "", ErrNotFound, 404},
		{"not found other wording", 404, `{"type":"error","error_code":404,"error":"Image alias not found"}`, "", ErrNotFound, 404},
		{"conflict", 409, `{"type":"error","error_code":409,"error":"Instance \"x\" already exists"}`, "", ErrConflict, 409},
		{"etag", 412, `{"type":"error","error_code":412,"error":"ETag doesn't match: a vs b"}`, "", ErrPreconditionFailed, 412},
		{"forbidden", 403, `{"type":"error","error_code":403,"error":"not authorized"}`, "", ErrForbidden, 403},
		{"bad request", 400, `{"type":"error","error_code":400,"error":"Unknown action: 'jump'"}`, "", ErrBadRequest, 400},
		{"invalid config is 500 on 5.0.2", 500, `{"type":"error","error_code":500,"error":"Invalid config"}`, "", nil, 500},
		{"error code missing uses http status", 404, `{"type":"error","error":"x"}`, "", ErrNotFound, 404},
		{"plain text 404", 404, "404 page not found\n", "", ErrNotFound, 404},
		{"garbage 200", 200, "<html>", "", ErrProtocol, 0},
		{"unknown type", 200, `{"type":"weird"}`, "", ErrProtocol, 0},
		{"empty 200", 200, "", "", ErrProtocol, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := decodeResponse("GET", "/1.0/x", tc.status, strings.NewReader(tc.body))
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var lerr *Error
			if tc.wantCode != 0 {
				if !errors.As(err, &lerr) || lerr.StatusCode != tc.wantCode {
					t.Fatalf("err = %#v, want *Error with code %d", err, tc.wantCode)
				}
				if lerr.Message == "" || !strings.Contains(err.Error(), "/1.0/x") {
					t.Fatalf("error %q lacks message or path", err)
				}
				return
			}
			if tc.wantErr == nil && (err != nil || r.Type != tc.wantType) {
				t.Fatalf("r = %+v, err = %v; want type %s", r, err, tc.wantType)
			}
		})
	}
}

// TestWaitOperationDialects covers /wait across LXD 5.0.2, 5.0.3+/5.21/6.x
// and Incus.
func TestWaitOperationDialects(t *testing.T) {
	type step func(w http.ResponseWriter)
	opBody := func(status int, errText string, meta any) step {
		return func(w http.ResponseWriter) { writeSync(w, op("op1", status, errText, meta)) }
	}
	envErr := func(msg string) step { // 5.0.3+: HTTP 200 with an error envelope
		return func(w http.ResponseWriter) { writeError(w, 200, 400, msg) }
	}
	for _, tc := range []struct {
		name     string
		waits    []step
		gets     []step // answers to GET /1.0/operations/op1
		wantErr  error
		wantMsg  string
		wantCode int // metadata.return, -1 for none
	}{
		{name: "5.0.2 running then success",
			waits: []step{opBody(103, "", nil), opBody(200, "", map[string]int{"return": 0})}, wantCode: 0},
		{name: "5.0.2 failure",
			waits: []step{opBody(400, "boom", nil)}, wantErr: ErrOperationFailed, wantMsg: "boom", wantCode: -1},
		{name: "5.0.3+ timeout envelope then success",
			waits: []step{envErr("context deadline exceeded"), opBody(200, "", map[string]int{"return": 4})},
			gets:  []step{opBody(103, "", nil)}, wantCode: 4},
		{name: "5.0.3+ failure envelope, op readable",
			waits:   []step{envErr("Command not found")},
			gets:    []step{opBody(400, "Command not found", map[string]int{"return": 127})},
			wantErr: ErrOperationFailed, wantMsg: "Command not found", wantCode: 127},
		{name: "5.0.3+ failure envelope, op forgotten",
			waits:   []step{envErr("boom")},
			gets:    []step{func(w http.ResponseWriter) { writeError(w, 404, 404, "Operation not found") }},
			wantErr: ErrOperationFailed, wantMsg: "boom", wantCode: -1},
		{name: "5.0.3+ timeout envelope, op ended and forgotten",
			waits:   []step{envErr("context deadline exceeded")},
			gets:    []step{func(w http.ResponseWriter) { writeError(w, 404, 404, "Operation not found") }},
			wantErr: ErrOperationForgotten, wantMsg: "Operation not found", wantCode: -1},
		{name: "incus returns the op like 5.0.2",
			waits: []step{opBody(103, "", nil), opBody(103, "", nil), opBody(200, "", map[string]int{"return": 2})}, wantCode: 2},
		{name: "cancelled",
			waits: []step{opBody(401, "", nil)}, wantErr: ErrOperationCancelled, wantCode: -1},
		{name: "operation gone",
			waits: []step{func(w http.ResponseWriter) { writeError(w, 404, 404, "Operation not found") }}, wantErr: ErrNotFound, wantCode: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			var nw, ng atomic.Int32
			f.mux.HandleFunc("GET /1.0/operations/op1/wait", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Query().Get("timeout") == "" {
					t.Errorf("wait without timeout")
				}
				tc.waits[min(int(nw.Add(1))-1, len(tc.waits)-1)](w)
			})
			f.mux.HandleFunc("GET /1.0/operations/op1", func(w http.ResponseWriter, r *http.Request) {
				tc.gets[min(int(ng.Add(1))-1, len(tc.gets)-1)](w)
			})
			c := f.client(t, Options{})
			o, err := c.WaitOperation(context.Background(), "/1.0/operations/op1")
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err %q lacks %q", err, tc.wantMsg)
			}
			code := -1
			if o != nil {
				var m execMeta
				if json.Unmarshal(o.Metadata, &m) == nil && m.Return != nil {
					code = *m.Return
				}
			}
			if code != tc.wantCode {
				t.Fatalf("return = %d, want %d", code, tc.wantCode)
			}
		})
	}
}

func TestWaitOperationContext(t *testing.T) {
	f := newFake(t, nil)
	waiting := make(chan struct{})
	f.mux.HandleFunc("GET /1.0/operations/op1/wait", func(w http.ResponseWriter, r *http.Request) {
		close(waiting)
		<-r.Context().Done()
	})
	c := f.client(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-waiting; cancel() }()
	if _, err := c.WaitOperation(ctx, "op1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestStopLateHook: LXD 5.0 can fail a forced stop with "operation timed
// out after 30s" while the container stops moments later
// (canonical/lxd#11421); SetState trusts the state it then reaches, and
// still reports a stop that never happens.
func TestStopLateHook(t *testing.T) {
	for _, tc := range []struct {
		name         string
		force, stops bool
		errText      string
		forcedErr    string // the escalated forced stop's failure, when not errText
		wantPuts     int32
		wantErr      error
	}{
		{name: "forced, stops late", force: true, stops: true, errText: `Instance "stop" operation timed out after 30s`, wantPuts: 1},
		{name: "graceful, escalated, stops late", stops: true, errText: `Instance "stop" operation timed out after 30s`, wantPuts: 2},
		{name: "forced, never stops", force: true, errText: `Instance "stop" operation timed out after 30s`, wantPuts: 1, wantErr: ErrOperationFailed},
		{name: "other failure, not waited for", force: true, stops: true, errText: "boom", wantPuts: 1, wantErr: ErrOperationFailed},
		// The graceful stop failed, yet the container stopped before the
		// forced one arrived (seen in CI: "The instance is already
		// stopped"): the caller's goal is reached.
		{name: "graceful failed, stopped before the forced stop", errText: "Failed shutting down instance, status is \"Running\": context deadline exceeded",
			forcedErr: "The instance is already stopped", wantPuts: 2},
		{name: "graceful failed, forced fails otherwise", errText: "Failed shutting down instance", forcedErr: "boom", wantPuts: 2, wantErr: ErrOperationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			var gets, puts atomic.Int32
			f.mux.HandleFunc("PUT /1.0/instances/c1/state", func(w http.ResponseWriter, r *http.Request) {
				puts.Add(1)
				writeAsync(w, op("op1", 103, "", nil))
			})
			f.mux.HandleFunc("GET /1.0/operations/op1/wait", func(w http.ResponseWriter, r *http.Request) {
				text := tc.errText
				if puts.Load() == 2 && tc.forcedErr != "" {
					text = tc.forcedErr
				}
				writeSync(w, op("op1", 400, text, nil))
			})
			f.mux.HandleFunc("GET /1.0/instances/c1", func(w http.ResponseWriter, r *http.Request) {
				status := "Running"
				if tc.stops && gets.Add(1) > 2 {
					status = "Stopped"
				}
				writeSync(w, map[string]any{"name": "c1", "status": status})
			})
			c := f.client(t, Options{})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err := c.SetState(ctx, "c1", StateRequest{Action: "stop", Force: tc.force})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if n := puts.Load(); n != tc.wantPuts {
				t.Fatalf("%d stop requests, want %d", n, tc.wantPuts)
			}
			if tc.errText == "boom" && gets.Load() != 0 {
				t.Fatal("waited for Stopped after a failure that was not a timeout")
			}
		})
	}
}

func TestCreateInstance(t *testing.T) {
	for _, tc := range []struct {
		name       string
		clustered  bool
		answer     func(w http.ResponseWriter)
		wantErr    error
		wantTarget string
	}{
		{name: "ok", answer: func(w http.ResponseWriter) { writeAsync(w, op("c1", 103, "", nil)) }},
		{name: "target only when clustered", clustered: true, wantTarget: "node2",
			answer: func(w http.ResponseWriter) { writeAsync(w, op("c1", 103, "", nil)) }},
		{name: "5.0.2 duplicate: 202 then failed op", wantErr: ErrConflict,
			answer: func(w http.ResponseWriter) { writeAsync(w, op("dup", 103, "", nil)) }},
		{name: "5.21.7 duplicate: sync 409", wantErr: ErrConflict,
			answer: func(w http.ResponseWriter) { writeError(w, 409, 409, `Instance "x" already exists`) }},
		{name: "missing alias", wantErr: ErrNotFound,
			answer: func(w http.ResponseWriter) { writeError(w, 404, 404, "Image alias not found") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, map[string]any{"server": "lxd", "server_clustered": tc.clustered})
			var got InstancesPost
			var gotQuery string
			f.mux.HandleFunc("POST /1.0/instances", func(w http.ResponseWriter, r *http.Request) {
				gotQuery = r.URL.RawQuery
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q", ct)
				}
				_ = json.NewDecoder(r.Body).Decode(&got)
				tc.answer(w)
			})
			f.mux.HandleFunc("GET /1.0/operations/c1/wait", func(w http.ResponseWriter, r *http.Request) {
				writeSync(w, op("c1", 200, "", nil))
			})
			f.mux.HandleFunc("GET /1.0/operations/dup/wait", func(w http.ResponseWriter, r *http.Request) {
				writeSync(w, op("dup", 400, `Failed creating instance record: Add instance info to the database: This "instances" entry already exists`, nil))
			})
			c := f.client(t, Options{Project: "p1", Target: "node2"})
			err := c.CreateInstance(context.Background(), InstancesPost{Name: "x", Source: InstanceSource{Alias: "busybox"}})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got.Type != "container" || got.Source.Type != "image" || got.Source.Alias != "busybox" || len(got.Profiles) != 1 {
				t.Fatalf("request %+v", got)
			}
			want := "project=p1"
			if tc.wantTarget != "" {
				want = "project=p1&target=" + tc.wantTarget
			}
			if gotQuery != want {
				t.Fatalf("query %q, want %q", gotQuery, want)
			}
		})
	}
}

func TestUpdateInstanceETag(t *testing.T) {
	f := newFake(t, nil)
	f.mux.HandleFunc("PATCH /1.0/instances/c1", func(w http.ResponseWriter, r *http.Request) {
		var p map[string]map[string]string
		_ = json.NewDecoder(r.Body).Decode(&p)
		if r.Header.Get("If-Match") != `"abc"` {
			writeError(w, 412, 412, "ETag doesn't match")
			return
		}
		if v, ok := p["config"]["k"]; !ok || v != "" {
			t.Errorf("config %v: want k deleted with \"\"", p["config"])
		}
		writeSync(w, map[string]any{})
	})
	c := f.client(t, Options{})
	patch := InstancePatch{Config: map[string]string{"k": ""}}
	if err := c.UpdateInstance(context.Background(), "c1", patch, `"abc"`); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateInstance(context.Background(), "c1", patch, `"old"`); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("err = %v, want ErrPreconditionFailed", err)
	}
}

func TestOctalMode(t *testing.T) {
	for _, tc := range []struct {
		mode os.FileMode
		want string
	}{
		{0o640, "0640"}, {0o755, "0755"}, {0o7, "07"}, {0o4755 | os.ModeSetuid, "04755"},
		{0o755 | os.ModeSetuid, "04755"}, {0o777 | os.ModeSticky, "01777"}, {0o750 | os.ModeSetgid | os.ModeDir, "02750"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := octalMode(tc.mode); got != tc.want {
				t.Fatalf("octalMode(%v) = %q, want %q", tc.mode, got, tc.want)
			}
			back, err := parseOctalMode(tc.want)
			if err != nil || octalMode(back) != tc.want {
				t.Fatalf("parseOctalMode(%q) = %v, %v", tc.want, back, err)
			}
		})
	}
	for _, bad := range []string{"", "0o640", "9", "-1", "077777"} {
		if _, err := parseOctalMode(bad); !errors.Is(err, ErrProtocol) {
			t.Errorf("parseOctalMode(%q) = %v, want ErrProtocol", bad, err)
		}
	}
}

func TestPushFile(t *testing.T) {
	for _, tc := range []struct {
		name       string
		server     string
		extensions []string
		opts       FileOptions
		body       string
		want       map[string]string // header suffix -> value ("" = absent)
	}{
		{name: "lxd file", server: "lxd", opts: FileOptions{Mode: 0o640, UID: 1000, GID: 1001}, body: "data",
			want: map[string]string{"X-LXD-Mode": "0640", "X-LXD-Uid": "1000", "X-LXD-Gid": "1001", "X-LXD-Type": "file",
				"X-LXD-Write": "overwrite", "X-LXD-Modify-Perm": ""}},
		{name: "incus headers", server: "incus", opts: FileOptions{Mode: 0o600}, body: "x",
			want: map[string]string{"X-Incus-Mode": "0600", "X-Incus-Type": "file", "X-LXD-Mode": ""}},
		{name: "modify-perm when supported", server: "lxd", extensions: []string{"instances_files_modify_permissions"},
			opts: FileOptions{Mode: 0o700, Append: true}, body: "y",
			want: map[string]string{"X-LXD-Modify-Perm": "mode,uid,gid", "X-LXD-Write": "append"}},
		{name: "default mode not sent", server: "lxd", body: "z", want: map[string]string{"X-LXD-Mode": ""}},
		{name: "symlink", server: "lxd", opts: FileOptions{Type: FileTypeSymlink}, body: "/target",
			want: map[string]string{"X-LXD-Type": "symlink"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, map[string]any{"server": tc.server}, tc.extensions...)
			var gotHdr http.Header
			var gotBody []byte
			var gotPath string
			f.mux.HandleFunc("POST /1.0/instances/c1/files", func(w http.ResponseWriter, r *http.Request) {
				gotHdr, gotPath = r.Header, r.URL.Query().Get("path")
				gotBody, _ = io.ReadAll(r.Body)
				writeSync(w, map[string]any{})
			})
			c := f.client(t, Options{})
			if err := c.PushFile(context.Background(), "c1", "/a b/f", strings.NewReader(tc.body), tc.opts); err != nil {
				t.Fatal(err)
			}
			if ct := gotHdr.Get("Content-Type"); ct != "application/octet-stream" {
				t.Fatalf("Content-Type %q: a form body makes LXD write 0 bytes", ct)
			}
			if string(gotBody) != tc.body || gotPath != "/a b/f" {
				t.Fatalf("body %q path %q", gotBody, gotPath)
			}
			for k, v := range tc.want {
				if got := gotHdr.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestPushFileBadInput(t *testing.T) {
	f := newFake(t, nil)
	c := f.client(t, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name, inst, path string
		opts             FileOptions
	}{
		{"relative path", "c1", "etc/passwd", FileOptions{}},
		{"bad type", "c1", "/f", FileOptions{Type: "fifo"}},
		{"negative uid", "c1", "/f", FileOptions{UID: -1}},
		{"bad instance", "../x", "/f", FileOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := c.PushFile(ctx, tc.inst, tc.path, strings.NewReader(""), tc.opts); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("err = %v, want ErrBadRequest", err)
			}
		})
	}
}

func TestMkdirOneLevelAtATime(t *testing.T) {
	f := newFake(t, nil)
	var mu sync.Mutex
	var made []string
	f.mux.HandleFunc("POST /1.0/instances/c1/files", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		made = append(made, r.URL.Query().Get("path")+":"+r.Header.Get("X-LXD-Type"))
		mu.Unlock()
		writeSync(w, map[string]any{})
	})
	c := f.client(t, Options{})
	if err := c.PushFile(context.Background(), "c1", "/w/a/b/f", strings.NewReader("x"), FileOptions{MkdirParents: true}); err != nil {
		t.Fatal(err)
	}
	want := "/w:directory,/w/a:directory,/w/a/b:directory,/w/a/b/f:file"
	if got := strings.Join(made, ","); got != want {
		t.Fatalf("requests %s, want %s", got, want)
	}
}

func TestPullFile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		server   string
		handler  func(w http.ResponseWriter)
		wantErr  error
		wantInfo FileInfo
		wantBody string
	}{
		{name: "file", server: "lxd", handler: func(w http.ResponseWriter) {
			h := w.Header()
			h.Set("X-Lxd-Type", "file")
			h.Set("X-Lxd-Mode", "0640")
			h.Set("X-Lxd-Uid", "1000")
			h.Set("X-Lxd-Gid", "1000")
			h.Set("X-Lxd-Modified", "2026-12-02 13:54:46 +0000 UTC")
			_, _ = w.Write([]byte("content"))
		}, wantInfo: FileInfo{Mode: 0o640, UID: 1000, GID: 1000, Type: "file", Size: 7}, wantBody: "content"},
		{name: "incus file", server: "incus", handler: func(w http.ResponseWriter) {
			w.Header().Set("X-Incus-Type", "file")
			w.Header().Set("X-Incus-Mode", "0600")
			_, _ = w.Write([]byte("c"))
		}, wantInfo: FileInfo{Mode: 0o600, Type: "file", Size: 1}, wantBody: "c"},
		{name: "length not announced", server: "lxd", handler: func(w http.ResponseWriter) {
			w.Header().Set("X-Lxd-Type", "file")
			w.Header().Set("X-Lxd-Mode", "0644")
			w.(http.Flusher).Flush() // chunked: no Content-Length
			_, _ = w.Write([]byte("streamed"))
		}, wantInfo: FileInfo{Mode: 0o644, Type: "file", Size: -1}, wantBody: "streamed"},
		{name: "symlink body is the target", server: "lxd", handler: func(w http.ResponseWriter) {
			w.Header().Set("X-Lxd-Type", "symlink")
			w.Header().Set("X-Lxd-Mode", "0777")
			_, _ = w.Write([]byte("/etc/passwd"))
		}, wantInfo: FileInfo{Mode: 0o777 | os.ModeSymlink, Type: "symlink", Size: 11}, wantBody: "/etc/passwd"},
		{name: "directory", server: "lxd", handler: func(w http.ResponseWriter) {
			w.Header().Set("X-Lxd-Type", "directory")
			writeSync(w, []string{"a", "b"})
		}, wantErr: ErrIsDirectory},
		{name: "missing", server: "lxd", handler: func(w http.ResponseWriter) {
			writeError(w, 404, 404, "Not Found")
		}, wantErr: ErrNotFound},
		{name: "no type header", server: "lxd", handler: func(w http.ResponseWriter) {
			_, _ = w.Write([]byte("?"))
		}, wantErr: ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, map[string]any{"server": tc.server})
			f.mux.HandleFunc("GET /1.0/instances/c1/files", func(w http.ResponseWriter, r *http.Request) { tc.handler(w) })
			c := f.client(t, Options{})
			rc, info, err := c.PullFile(context.Background(), "c1", "/f")
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			body, _ := io.ReadAll(rc)
			info.ModTime = time.Time{}
			if string(body) != tc.wantBody || *info != tc.wantInfo {
				t.Fatalf("body %q info %+v, want %q %+v", body, *info, tc.wantBody, tc.wantInfo)
			}
		})
	}
}

// execFake serves one exec operation with websockets, scripted per fd.
type execFake struct {
	t           *testing.T
	interactive bool
	fds         map[string]func(*websocket.Conn) // by fd name
	result      chan map[string]any              // final op, sent by a fd script
	refuse      string                           // fd whose handshake fails
	refuseMsg   string                           // its error; "permission denied" if empty
	refuseCode  int                              // its HTTP status and error_code; 500 if 0
	posts       atomic.Int32                     // exec requests seen
	before      map[string]func()                // runs before the fd's handshake answer
}

func (e *execFake) install(f *fakeServer) {
	up := websocket.Upgrader{}
	f.mux.HandleFunc("POST /1.0/instances/c1/exec", func(w http.ResponseWriter, r *http.Request) {
		e.posts.Add(1)
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req["wait-for-websocket"] != true || req["interactive"] != e.interactive {
			e.t.Errorf("exec request %v", req)
		}
		fds := map[string]string{}
		for name := range e.fds {
			fds[name] = "secret-" + name
		}
		o := op("ex1", 103, "", map[string]any{"fds": fds})
		o["class"] = "websocket"
		writeAsync(w, o)
	})
	f.mux.HandleFunc("GET /1.0/operations/ex1/websocket", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Query().Get("secret"), "secret-")
		script, ok := e.fds[name]
		if !ok || name == e.refuse {
			code := cmp.Or(e.refuseCode, 500)
			writeError(w, code, code, cmp.Or(e.refuseMsg, "permission denied"))
			return
		}
		if hook := e.before[name]; hook != nil {
			hook()
		}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		script(conn)
	})
	f.mux.HandleFunc("GET /1.0/operations/ex1/wait", func(w http.ResponseWriter, r *http.Request) {
		select {
		case o := <-e.result:
			writeSync(w, o)
		case <-r.Context().Done():
		}
	})
}

// dropWithoutClose ends a websocket the way LXD ends exec output: no Close
// frame, so the client sees 1006 / EOF.
func dropWithoutClose(c *websocket.Conn) { _ = c.UnderlyingConn().Close() }

func readUntilText(c *websocket.Conn) (string, error) {
	var b bytes.Buffer
	for {
		typ, data, err := c.ReadMessage()
		if err != nil {
			return b.String(), err
		}
		if typ == websocket.TextMessage {
			return b.String(), nil
		}
		b.Write(data)
	}
}

func TestExecNonInteractiveFraming(t *testing.T) {
	f := newFake(t, nil)
	stdinGot := make(chan string, 1)
	ef := &execFake{t: t, result: make(chan map[string]any, 1)}
	var outputs sync.WaitGroup
	outputs.Add(2)
	ef.fds = map[string]func(*websocket.Conn){
		"control": func(c *websocket.Conn) { _, _, _ = c.ReadMessage() },
		"0": func(c *websocket.Conn) {
			s, _ := readUntilText(c) // stdin ends with an empty Text barrier
			stdinGot <- s
			outputs.Wait()
			ef.result <- op("ex1", 200, "", map[string]any{"return": 3})
			dropWithoutClose(c)
		},
		"1": func(c *websocket.Conn) {
			for i := 0; i < 4; i++ {
				_ = c.WriteMessage(websocket.BinaryMessage, bytes.Repeat([]byte{'o'}, 65536))
			}
			_ = c.WriteMessage(websocket.TextMessage, nil)
			outputs.Done()
			dropWithoutClose(c)
		},
		"2": func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.BinaryMessage, []byte("err-line\n"))
			_ = c.WriteMessage(websocket.TextMessage, nil)
			outputs.Done()
			dropWithoutClose(c)
		},
	}
	ef.install(f)
	c := f.client(t, Options{})
	e, err := c.Exec(context.Background(), "c1", ExecRequest{Command: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Stdin().Write(bytes.Repeat([]byte("i"), 100000)); err != nil {
		t.Fatal(err)
	}
	if err := e.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	var errOut []byte
	done := make(chan struct{})
	go func() { errOut, _ = io.ReadAll(e.Stderr()); close(done) }()
	out, err := io.ReadAll(e.Stdout())
	<-done
	if err != nil || len(out) != 4*65536 || string(errOut) != "err-line\n" {
		t.Fatalf("stdout %d bytes (%v), stderr %q", len(out), err, errOut)
	}
	if s := <-stdinGot; len(s) != 100000 {
		t.Fatalf("stdin got %d bytes", len(s))
	}
	if code, err := e.Wait(); code != 3 || err != nil {
		t.Fatalf("Wait = %d, %v; want 3, nil", code, err)
	}
}

// TestExecInteractiveEndOfStream: EOF is ^D (never a barrier while the
// command runs), the client answers the server's barrier (else the op never
// ends), and resize sends width/height as strings.
func TestExecInteractiveEndOfStream(t *testing.T) {
	f := newFake(t, nil)
	ef := &execFake{t: t, interactive: true, result: make(chan map[string]any, 1)}
	resized := make(chan map[string]any, 1)
	ef.fds = map[string]func(*websocket.Conn){
		"control": func(c *websocket.Conn) {
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					return
				}
				var m struct {
					Command string `json:"command"`
					Args    struct {
						Width  string `json:"width"`
						Height string `json:"height"`
					} `json:"args"`
				}
				if err := json.Unmarshal(data, &m); err != nil {
					t.Errorf("control message %s does not decode like LXD's: %v", data, err)
				}
				resized <- map[string]any{"cmd": m.Command, "w": m.Args.Width, "h": m.Args.Height}
			}
		},
		"0": func(c *websocket.Conn) {
			for {
				typ, data, err := c.ReadMessage()
				if err != nil {
					t.Errorf("fd 0 read: %v", err)
					return
				}
				if typ == websocket.TextMessage {
					t.Errorf("client sent a barrier while the command ran")
					return
				}
				if bytes.Equal(data, []byte{0x04}) {
					break
				}
			}
			_ = c.WriteMessage(websocket.BinaryMessage, []byte("bye\r\n"))
			_ = c.WriteMessage(websocket.TextMessage, nil)
			// The op stays running until the client answers the barrier.
			typ, _, err := c.ReadMessage()
			var ce *websocket.CloseError
			if err != nil && !errors.As(err, &ce) || err == nil && typ != websocket.TextMessage {
				t.Errorf("client did not answer the barrier: %v", err)
			}
			ef.result <- op("ex1", 200, "", map[string]any{"return": 0})
			dropWithoutClose(c)
		},
	}
	ef.install(f)
	c := f.client(t, Options{})
	e, err := c.Exec(context.Background(), "c1", ExecRequest{Command: []string{"sh"}, Interactive: true, Width: 80, Height: 24})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Resize(120, 40); err != nil {
		t.Fatal(err)
	}
	if got := <-resized; got["cmd"] != "window-resize" || got["w"] != "120" || got["h"] != "40" {
		t.Fatalf("resize message %v", got)
	}
	if err := e.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(e.Stdout())
	if string(out) != "bye\r\n" {
		t.Fatalf("stdout %q", out)
	}
	if code, err := e.Wait(); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
}

func TestExecCancelSignals(t *testing.T) {
	f := newFake(t, nil)
	ef := &execFake{t: t, result: make(chan map[string]any, 1)}
	signals := make(chan int, 4)
	ef.fds = map[string]func(*websocket.Conn){
		"control": func(c *websocket.Conn) {
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					return
				}
				var m struct {
					Command string `json:"command"`
					Signal  int    `json:"signal"`
				}
				_ = json.Unmarshal(data, &m)
				signals <- m.Signal
				if m.Signal == 9 {
					ef.result <- op("ex1", 200, "", map[string]any{"return": 137})
				}
			}
		},
		"0": func(c *websocket.Conn) { _, _ = readUntilText(c) },
		"1": func(c *websocket.Conn) { _, _ = readUntilText(c) },
		"2": func(c *websocket.Conn) { _, _ = readUntilText(c) },
	}
	ef.install(f)
	c := f.client(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	e, err := c.Exec(ctx, "c1", ExecRequest{Command: []string{"stubborn"}, KillGrace: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The caller reads nothing: Wait must still return after cancel.
	cancel()
	code, err := e.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %d, %v; want context.Canceled", code, err)
	}
	if _, err := io.ReadAll(e.Stdout()); !errors.Is(err, context.Canceled) {
		t.Fatalf("stdout after abort: %v, want context.Canceled", err)
	}
	if a, b := <-signals, <-signals; a != 15 || b != 9 {
		t.Fatalf("signals %d, %d; want 15 then 9", a, b)
	}
}

// TestExecPingAfterPeerClosed: LXD pings, sends the last output and the
// barrier, and drops the socket before the client reads. Answering the ping
// then fails (EPIPE); the buffered output and barrier must still arrive.
func TestExecPingAfterPeerClosed(t *testing.T) {
	f := newFake(t, nil)
	ef := &execFake{t: t, result: make(chan map[string]any, 1)}
	fd1Closed := make(chan struct{})
	ef.before = map[string]func(){"2": func() { <-fd1Closed }}
	ef.fds = map[string]func(*websocket.Conn){
		"control": func(c *websocket.Conn) { _, _, _ = c.ReadMessage() },
		"0":       func(c *websocket.Conn) { _, _ = readUntilText(c) },
		"1": func(c *websocket.Conn) {
			_ = c.WriteControl(websocket.PingMessage, []byte("keepalive"), time.Now().Add(time.Second))
			_ = c.WriteMessage(websocket.BinaryMessage, []byte("last words"))
			_ = c.WriteMessage(websocket.TextMessage, nil)
			dropWithoutClose(c)
			close(fd1Closed)
		},
		"2": func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, nil)
			ef.result <- op("ex1", 200, "", map[string]any{"return": 0})
			dropWithoutClose(c)
		},
	}
	ef.install(f)
	c := f.client(t, Options{})
	e, err := c.Exec(context.Background(), "c1", ExecRequest{Command: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()) }()
	out, err := io.ReadAll(e.Stdout())
	if err != nil || string(out) != "last words" {
		t.Fatalf("stdout %q, %v", out, err)
	}
	if code, err := e.Wait(); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
}

func TestExecBadRequest(t *testing.T) {
	f := newFake(t, nil)
	c := f.client(t, Options{})
	for _, tc := range []struct {
		name string
		inst string
		req  ExecRequest
	}{
		{"empty command", "c1", ExecRequest{}},
		{"bad instance", "a/b", ExecRequest{Command: []string{"x"}}},
		{"env key with =", "c1", ExecRequest{Command: []string{"x"}, Env: map[string]string{"A=B": "secret-value"}}},
		{"empty env key", "c1", ExecRequest{Command: []string{"x"}, Env: map[string]string{"": "v"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Exec(context.Background(), tc.inst, tc.req)
			if !errors.Is(err, ErrBadRequest) || strings.Contains(err.Error(), "secret-value") {
				t.Fatalf("err = %v, want ErrBadRequest without the value", err)
			}
		})
	}
}

func TestExecBadSecret(t *testing.T) {
	f := newFake(t, nil)
	ef := &execFake{t: t, result: make(chan map[string]any, 1), refuse: "2"}
	noop := func(c *websocket.Conn) { _, _ = readUntilText(c) }
	ef.fds = map[string]func(*websocket.Conn){"control": noop, "0": noop, "1": noop, "2": noop}
	ef.install(f)
	c := f.client(t, Options{})
	_, err := c.Exec(context.Background(), "c1", ExecRequest{Command: []string{"x"}})
	var lerr *Error
	if !errors.As(err, &lerr) || lerr.StatusCode != 500 || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("err = %v, want the handshake's 500 permission denied", err)
	}
	if strings.Contains(err.Error(), "secret-") {
		t.Fatalf("error %q leaks the fd secret", err)
	}
}

// TestExecStreamsTimedOut: when LXD gave up waiting for the streams (its
// 5 s, on a loaded host) the command never ran, so Exec starts it again, a
// bounded number of times; any other handshake failure is not retried
// (TestExecBadSecret).
func TestExecStreamsTimedOut(t *testing.T) {
	// Control is connected first, the data streams after it: whichever
	// failed, the command never ran, so it is started again.
	for _, tc := range []struct {
		refuse, msg string
		code        int
	}{
		{"1", "Only running operations can be connected", 500},
		{"control", "Only running operations can be connected", 500},
		{"control", "Operation not found", 404}, // LXD already forgot it (served late)
	} {
		refuse, wantPosts := tc.refuse, int32(execAttempts)
		f := newFake(t, nil)
		ef := &execFake{t: t, result: make(chan map[string]any, execAttempts), refuse: refuse, refuseMsg: tc.msg, refuseCode: tc.code}
		for range execAttempts {
			ef.result <- op("ex1", 400, "Timed out waiting for websockets to connect", nil)
		}
		noop := func(c *websocket.Conn) { _, _ = readUntilText(c) }
		ef.fds = map[string]func(*websocket.Conn){"control": noop, "0": noop, "1": noop, "2": noop}
		ef.install(f)
		c := f.client(t, Options{})
		_, err := c.Exec(context.Background(), "c1", ExecRequest{Command: []string{"x"}})
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Fatalf("refuse %s: err = %v, want the last attempt's handshake error", refuse, err)
		}
		if n := ef.posts.Load(); n != wantPosts {
			t.Fatalf("refuse %s: %d exec requests, want %d", refuse, n, wantPosts)
		}
	}
}

func TestEventsDecode(t *testing.T) {
	for _, tc := range []struct {
		name, raw            string
		wantInst, wantProj   string
		wantAction, wantType string
		wantStopped          bool
	}{
		{name: "5.0.2 name from source",
			raw:      `{"type":"lifecycle","timestamp":"2026-12-02T13:59:16.1Z","metadata":{"action":"instance-started","source":"/1.0/instances/probe-a","requestor":{"username":"root"}},"location":"none","project":"default"}`,
			wantInst: "probe-a", wantProj: "default", wantAction: "instance-started", wantType: "lifecycle"},
		{name: "5.0.3+ metadata name wins",
			raw:      `{"type":"lifecycle","timestamp":"2026-12-02T13:59:16.1Z","metadata":{"action":"instance-shutdown","source":"/1.0/instances/a","name":"a","project":"p"}}`,
			wantInst: "a", wantProj: "p", wantAction: "instance-shutdown", wantType: "lifecycle", wantStopped: true},
		{name: "project in source query",
			raw:      `{"type":"lifecycle","metadata":{"action":"instance-stopped","source":"/1.0/instances/b?project=other"}}`,
			wantInst: "b", wantProj: "other", wantAction: "instance-stopped", wantType: "lifecycle", wantStopped: true},
		{name: "sub-resource source",
			raw:      `{"type":"lifecycle","metadata":{"action":"instance-file-pushed","source":"/1.0/instances/c/files"}}`,
			wantInst: "c", wantAction: "instance-file-pushed", wantType: "lifecycle"},
		{name: "operation", raw: `{"type":"operation","metadata":{"id":"x","status_code":200}}`, wantType: "operation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := decodeEvent([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != tc.wantType || ev.Instance != tc.wantInst || ev.Project != tc.wantProj || ev.Action != tc.wantAction || ev.Stopped() != tc.wantStopped {
				t.Fatalf("event %+v", ev)
			}
		})
	}
	// An evacuation's rename, as a 5.0.2 cluster member sends it: the copy
	// takes the real name; its member is the location.
	ev, err := decodeEvent([]byte(`{"type":"lifecycle","location":"rc-member1","metadata":{"action":"instance-renamed","source":"/1.0/instances/ev1","context":{"old_name":"lxd-move-of-b109d708-5f80-466e-8ac5-89be879a1e23"}},"project":"default"}`))
	if err != nil || ev.Instance != "ev1" || ev.OldName != MovePrefix+"b109d708-5f80-466e-8ac5-89be879a1e23" ||
		ev.Location != "rc-member1" || ev.Action != ActionInstanceRenamed {
		t.Errorf("renamed event %+v, %v", ev, err)
	}
	// A context that is not an object does not lose the event.
	if ev, err := decodeEvent([]byte(`{"type":"lifecycle","metadata":{"action":"instance-started","source":"/1.0/instances/x","context":"odd"}}`)); err != nil || ev.Instance != "x" {
		t.Errorf("odd context: %+v, %v", ev, err)
	}
	for _, bad := range []string{"", "{", `{"metadata":{}}`, `{"type":"lifecycle","metadata":[1]}`} {
		if _, err := decodeEvent([]byte(bad)); !errors.Is(err, ErrProtocol) {
			t.Errorf("decodeEvent(%q) = %v, want ErrProtocol", bad, err)
		}
	}
}

// TestEventsReconnect: the stream asks for explicit types, never writes,
// and comes back after the server drops it.
func TestEventsReconnect(t *testing.T) {
	f := newFake(t, nil)
	up := websocket.Upgrader{}
	var conns atomic.Int32
	f.mux.HandleFunc("GET /1.0/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("type") != "lifecycle,operation" || r.URL.Query().Get("project") != "p1" {
			t.Errorf("events query %q", r.URL.RawQuery)
		}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		n := conns.Add(1)
		go func() { // the client must never send a message
			for {
				_, data, err := c.ReadMessage()
				if err != nil {
					return
				}
				t.Errorf("client wrote %q on the event stream", data)
			}
		}()
		_ = c.WriteMessage(websocket.TextMessage, []byte(`{"type":"lifecycle","metadata":{"action":"instance-started","source":"/1.0/instances/n`+string(rune('0'+n))+`"}}`))
		if n == 1 {
			dropWithoutClose(c)
			return
		}
		<-r.Context().Done()
	})
	c := f.client(t, Options{Project: "p1"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := c.Events(ctx, EventTypeLifecycle, EventTypeOperation)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for ev := range ch {
		got = append(got, ev.Type+":"+ev.Instance)
		if len(got) == 3 {
			cancel()
		}
	}
	want := "lifecycle:n1," + EventReconnected + ":,lifecycle:n2"
	if strings.Join(got[:min(3, len(got))], ",") != want {
		t.Fatalf("events %v, want %s", got, want)
	}
}

func TestEventsBadType(t *testing.T) {
	f := newFake(t, nil)
	c := f.client(t, Options{})
	if _, err := c.Events(context.Background(), "lifecycle,logging"); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("err = %v, want ErrBadRequest", err)
	}
}

func TestDiscoverSocket(t *testing.T) {
	f := newFake(t, nil)
	t.Setenv("LXD_SOCKET", f.sock)
	if got, err := DiscoverSocket(); err != nil || got != f.sock {
		t.Fatalf("DiscoverSocket = %q, %v", got, err)
	}
	t.Setenv("LXD_SOCKET", "/nonexistent/x.sock")
	t.Setenv("LXD_DIR", strings.TrimSuffix(f.sock, "/unix.socket"))
	if got, err := DiscoverSocket(); err != nil || got != f.sock {
		t.Fatalf("DiscoverSocket via LXD_DIR = %q, %v", got, err)
	}
}

func TestUnreachable(t *testing.T) {
	f := newFake(t, nil)
	c := f.client(t, Options{})
	f.srv.Close() // closes the listener (removing the socket) and idle connections
	if _, _, err := c.Instance(context.Background(), "c1"); !errors.Is(err, ErrUnreachable) || errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrUnreachable only", err)
	}
	if _, err := Connect(context.Background(), Options{Socket: f.sock}); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Connect(missing socket) = %v, want ErrUnreachable", err)
	}
	t.Setenv("LXD_SOCKET", "/nonexistent/a.sock")
	t.Setenv("LXD_DIR", "/nonexistent")
	t.Setenv("INCUS_SOCKET", "/nonexistent/b.sock")
	t.Setenv("INCUS_DIR", "/nonexistent")
	if _, err := DiscoverSocket(); err != nil && !errors.Is(err, ErrUnreachable) {
		t.Fatalf("DiscoverSocket = %v, want ErrUnreachable when nothing exists", err)
	}
}

func TestConnectOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"http url", Options{URL: "http://x:8443"}, "want https"},
		{"no client cert", Options{URL: "https://127.0.0.1:1"}, "client_cert"},
		{"missing cert file", Options{URL: "https://127.0.0.1:1", ClientCert: "/nonexistent.crt", ClientKey: "/nonexistent.key"}, "load client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Connect(context.Background(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestFaultOperationForgottenChecksResource: LXD forgets a finished
// operation after about 5 s, so on a loaded host our wait can get 404
// "Operation not found" for an operation that succeeded (a CI run failed
// creating its container so). The call then stands or falls by the
// resource the operation was to make or change, and says what is unknown.
func TestFaultOperationForgottenChecksResource(t *testing.T) {
	opAt := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	inst := func(status string, created time.Time) map[string]any {
		return map[string]any{"name": "c1", "status": status, "created_at": created,
			"config": map[string]string{"limits.cpu": "2"}, "devices": map[string]any{}}
	}
	snap := map[string]any{"name": "s1", "created_at": opAt.Add(time.Second)}
	for _, tc := range []struct {
		name       string
		call       func(*Client) error
		inst, snap map[string]any // nil: 404
		wantErr    string         // "": success
	}{
		{name: "create, instance exists",
			call: createC1, inst: inst("Stopped", opAt.Add(100*time.Millisecond))},
		{name: "create, instance missing",
			call:    createC1,
			wantErr: `create instance "c1": lxd POST /1.0/instances: LXD forgot operation op1 before we read its result, and instance "c1" does not exist`},
		{name: "create, name was in use",
			call: createC1, inst: inst("Running", opAt.Add(-time.Hour)),
			wantErr: `LXD forgot operation op1 before we read its result, and instance "c1" is older than the operation (created 2026-12-03T14:00:00Z)`},
		{name: "stop, stopped",
			call: stopC1, inst: inst("Stopped", opAt)},
		{name: "stop, still running",
			call: stopC1, inst: inst("Running", opAt),
			wantErr: `LXD forgot operation op1 before we read its result, and instance "c1" is Running, not Stopped`},
		{name: "delete, gone",
			call: func(c *Client) error { return c.DeleteInstance(context.Background(), "c1") }},
		{name: "delete, still there",
			call: func(c *Client) error { return c.DeleteInstance(context.Background(), "c1") }, inst: inst("Stopped", opAt),
			wantErr: `LXD forgot operation op1 before we read its result, and instance "c1" still exists`},
		{name: "snapshot, made",
			call: func(c *Client) error { return c.CreateSnapshot(context.Background(), "c1", "s1", time.Time{}) }, snap: snap},
		{name: "snapshot, missing",
			call:    func(c *Client) error { return c.CreateSnapshot(context.Background(), "c1", "s1", time.Time{}) },
			wantErr: `LXD forgot operation op1 before we read its result, and snapshot "s1" of "c1" does not exist`},
		{name: "snapshot delete, gone",
			call: func(c *Client) error { return c.DeleteSnapshot(context.Background(), "c1", "s1") }},
		{name: "restore, unknowable",
			call:    func(c *Client) error { return c.RestoreSnapshot(context.Background(), "c1", "s1") },
			wantErr: `LXD forgot operation op1 before we read its result, and whether "c1" was restored from snapshot "s1" cannot be checked`},
		{name: "patch, applied",
			call: func(c *Client) error {
				return c.UpdateInstance(context.Background(), "c1", InstancePatch{Config: map[string]string{"limits.cpu": "2"}}, "")
			}, inst: inst("Stopped", opAt)},
		{name: "patch, not applied",
			call: func(c *Client) error {
				return c.UpdateInstance(context.Background(), "c1", InstancePatch{Config: map[string]string{"limits.cpu": "4"}}, "")
			}, inst: inst("Stopped", opAt),
			wantErr: `LXD forgot operation op1 before we read its result, and instance "c1" has config limits.cpu="2", not "4"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, nil)
			started := func(w http.ResponseWriter, r *http.Request) {
				o := op("op1", 103, "", nil)
				o["created_at"] = opAt
				writeAsync(w, o)
			}
			for _, route := range []string{"POST /1.0/instances", "PUT /1.0/instances/c1/state", "DELETE /1.0/instances/c1",
				"POST /1.0/instances/c1/snapshots", "DELETE /1.0/instances/c1/snapshots/s1", "PUT /1.0/instances/c1",
				"PATCH /1.0/instances/c1"} {
				f.mux.HandleFunc(route, started)
			}
			var waits atomic.Int32
			f.mux.HandleFunc("GET /1.0/operations/op1/wait", func(w http.ResponseWriter, r *http.Request) {
				waits.Add(1)
				writeError(w, 404, 404, "Operation not found")
			})
			serve := func(obj map[string]any, missing string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					if obj == nil {
						writeError(w, 404, 404, missing)
						return
					}
					writeSync(w, obj)
				}
			}
			f.mux.HandleFunc("GET /1.0/instances/c1", serve(tc.inst, "Instance not found"))
			f.mux.HandleFunc("GET /1.0/instances/c1/snapshots/s1", serve(tc.snap, "Snapshot not found"))

			err := tc.call(f.client(t, Options{}))
			if waits.Load() == 0 {
				t.Fatal("the operation was never waited for")
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v, want success: the resource shows the change done", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want it to say %q", err, tc.wantErr)
			}
			if !errors.Is(err, ErrOperationForgotten) || errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v: want ErrOperationForgotten, not ErrNotFound", err)
			}
		})
	}
}

func createC1(c *Client) error {
	return c.CreateInstance(context.Background(), InstancesPost{Name: "c1", Source: InstanceSource{Alias: "busybox"}})
}

func stopC1(c *Client) error {
	return c.SetState(context.Background(), "c1", StateRequest{Action: "stop", Force: true})
}

// busyThenDone serves route with LXD's "busy running a "stop" operation"
// refusal of an action three times, then an operation that succeeds; it
// returns the count of requests to route.
func busyThenDone(f *fakeServer, route, action string) *atomic.Int32 {
	var n atomic.Int32
	f.mux.HandleFunc(route, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 {
			writeError(w, http.StatusBadRequest, 400, `Failed to create instance `+action+` operation: Instance is busy running a "stop" operation`)
			return
		}
		writeAsync(w, op("op1", 103, "", nil))
	})
	f.mux.HandleFunc("GET /1.0/operations/op1/wait", func(w http.ResponseWriter, r *http.Request) {
		writeSync(w, op("op1", 200, "", nil))
	})
	return &n
}

// TestFaultDeleteWhileStopLockLingers: LXD 5.0 can report a stop failed
// ("timed out") while the container stops anyway, and its lock outlives
// that operation; the delete of the now stopped instance (remotectl
// project rm right after project stop) waits for it instead of failing
// with "Instance is busy running a "stop" operation" (seen in CI).
func TestFaultDeleteWhileStopLockLingers(t *testing.T) {
	f := newFake(t, nil)
	deletes := busyThenDone(f, "DELETE /1.0/instances/c1", "delete")
	f.mux.HandleFunc("GET /1.0/instances/c1", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, 404, "Instance not found")
	})
	c := f.client(t, Options{})
	if err := c.DeleteInstance(context.Background(), "c1"); err != nil {
		t.Fatalf("delete while a stop's lock lingers: %v", err)
	}
	if n := deletes.Load(); n != 4 {
		t.Fatalf("%d delete requests, want 4", n)
	}
}

// TestFaultDeleteStillBusyIsAConflict: an instance another operation
// holds past the wait is a conflict (the daemon answers 409 with LXD's
// reason), not an internal error, and never "already exists".
func TestFaultDeleteStillBusyIsAConflict(t *testing.T) {
	f := newFake(t, nil)
	deletes := busyThenDone(f, "DELETE /1.0/instances/c1", "delete")
	deletes.Store(-1000)
	c := f.client(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.DeleteInstance(ctx, "c1")
	var conflict interface{ Conflict() bool }
	if !errors.Is(err, ErrBusy) || !errors.As(err, &conflict) || !conflict.Conflict() || errors.Is(err, ErrConflict) ||
		!strings.Contains(err.Error(), `delete instance "c1": lxd DELETE /1.0/instances/c1: 400 Failed to create instance delete operation: Instance is busy running a "stop" operation`) {
		t.Fatalf("delete of an instance still busy: %v", err)
	}
}

// TestFaultInstanceBusy: LXD refuses a start while the lock of a stop made
// just before (outside the daemon) still holds the instance; SetState
// waits for it instead of failing the prompt that needed the container.
func TestFaultInstanceBusy(t *testing.T) {
	f := newFake(t, nil)
	puts := busyThenDone(f, "PUT /1.0/instances/c1/state", "start")
	c := f.client(t, Options{})
	if err := c.SetState(context.Background(), "c1", StateRequest{Action: "start"}); err != nil {
		t.Fatalf("start while a stop's lock lingers: %v", err)
	}
	if n := puts.Load(); n != 4 {
		t.Fatalf("%d start requests, want 4", n)
	}
	// A cancelled caller stops waiting and gets LXD's reason.
	puts.Store(-1000)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.SetState(ctx, "c1", StateRequest{Action: "start"}); err == nil || !strings.Contains(err.Error(), `is busy running a "stop" operation`) {
		t.Fatalf("start while busy, caller gives up: %v", err)
	}
}
