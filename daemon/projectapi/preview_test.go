package projectapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"remote/api"
	"remote/internal/testkit"
)

// previewGet sends GET path to the daemon as user with extra headers and
// returns the response with its body read.
func (e *projectEnv) previewGet(t *testing.T, path, user string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://remoted"+path, nil)
	req.Header.Set(api.HeaderUser, user)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestPreviewRoute: a project's ports are LXD proxy devices from a Unix
// socket in the daemon's preview directory (only the daemon's uid may use
// it) to the container's loopback; busybox httpd in the container answers
// through /v1/projects/{name}/ports/{port}/…, a WebSocket echo too; PATCH
// adds and removes devices live; a stopped project answers 503 naming it;
// a device removed behind the daemon's back is back after a start; an
// unknown port and another user's project are 404.
func TestPreviewRoute(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "previews")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	e := newProjectEnv(t, projectEnvOpts{previewDir: dir})
	proj := e.createProject(t, "alice", api.CreateProjectRequest{Name: uniqueProject("preview"), Ports: []int{8080, 8090}})
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start: %d %s", status, body)
	}
	inst, _, err := e.lxd.Instance(context.Background(), proj.Container)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, proj.ID+"-8080.sock")
	want := map[string]string{"type": "proxy", "bind": "host", "listen": "unix:" + sock, "connect": "tcp:127.0.0.1:8080",
		"uid": strconv.Itoa(os.Getuid()), "gid": strconv.Itoa(os.Getgid()), "mode": "0600"}
	if got := inst.Devices["remote-port-8080"]; !mapsEqual(got, want) {
		t.Fatalf("device remote-port-8080 = %v, want %v", got, want)
	}
	if inst.Devices["remote-port-8090"]["listen"] != "unix:"+filepath.Join(dir, proj.ID+"-8090.sock") {
		t.Fatalf("device remote-port-8090 = %v", inst.Devices["remote-port-8090"])
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
		t.Fatalf("socket %s: %v %v", sock, fi, err)
	}

	testkit.ServeHTTPD(t, e.lxd, proj.Container, 8080, "hello from the container\n")
	base := "/v1/projects/" + proj.Name + "/ports/"
	resp, body := e.previewGet(t, base+"8080/index.html", "alice", nil)
	if resp.StatusCode != http.StatusOK || body != "hello from the container\n" {
		t.Fatalf("GET through the daemon: %d %q", resp.StatusCode, body)
	}
	// A hostile app: headers acting beyond its origin or posing as ours
	// are dropped; it never learns who asks or through which frontend.
	resp, body = e.previewGet(t, base+"8080/cgi-bin/hostile?x=1", "alice",
		map[string]string{"X-Forwarded-For": "6.6.6.6", api.HeaderFrontend: "remote-web", "Origin": "http://page.example"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("hostile cgi: %d %s", resp.StatusCode, body)
	}
	for _, h := range []string{"X-Remote-User", "Strict-Transport-Security", "Clear-Site-Data"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("the app's %s: %q reached the caller", h, v)
		}
	}
	if want := "user=[] frontend=[] host=[localhost:8080] cookie=[]\n"; body != want {
		t.Errorf("the app saw %q, want %q", body, want)
	}

	// WebSocket through the route.
	testkit.ServeWSEcho(t, e.lxd, proj.Container, 8090)
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var nd net.Dialer
		return nd.DialContext(ctx, "unix", e.sock)
	}}
	ws, wresp, err := d.Dial("ws://remoted"+base+"8090/ws", http.Header{api.HeaderUser: {"alice"}})
	if err != nil {
		t.Fatalf("websocket through the daemon: %v (%v)", err, wresp)
	}
	if err := ws.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || string(msg) != "echo: hi" {
		t.Fatalf("websocket echo: %q %v", msg, err)
	}
	ws.Close()

	// Refusals.
	if resp, body := e.previewGet(t, base+"8080/index.html", "bob", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("bob through alice's preview: %d %s", resp.StatusCode, body)
	}
	resp, body = e.previewGet(t, base+"9999/", "alice", nil)
	if want := "port 9999 is not a port of project \"" + proj.Name + "\" (its ports: [8080 8090]; set them with PATCH /v1/projects/" + proj.Name + "): not found"; resp.StatusCode != http.StatusNotFound || errorMessage(t, []byte(body)) != want {
		t.Fatalf("unknown port: %d %s, want 404 %q", resp.StatusCode, body, want)
	}
	if resp, body := e.previewGet(t, base+"08080/", "alice", nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("port 08080: %d %s", resp.StatusCode, body)
	}

	// PATCH: 8090 goes, 8091 comes, live.
	status, pbody := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", map[string]any{"ports": []int{8080, 8091}})
	if status != http.StatusOK || !strings.Contains(string(pbody), `"ports":[8080,8091]`) {
		t.Fatalf("patch ports: %d %s", status, pbody)
	}
	inst, _, _ = e.lxd.Instance(context.Background(), proj.Container)
	if inst.Devices["remote-port-8090"] != nil || inst.Devices["remote-port-8091"]["connect"] != "tcp:127.0.0.1:8091" || !inst.Running() {
		t.Fatalf("devices after patch: %v (%s)", inst.Devices, inst.Status)
	}
	if resp, _ := e.previewGet(t, base+"8090/", "alice", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("removed port 8090: %d", resp.StatusCode)
	}
	if status, body := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", map[string]any{"ports": []int{8080, 8080}}); status != http.StatusBadRequest ||
		errorMessage(t, body) != "invalid or repeated port 8080 in ports" {
		t.Fatalf("repeated port: %d %s", status, body)
	}

	// Stopped: 503 naming the project.
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/stop", "alice", nil); status != http.StatusOK {
		t.Fatalf("stop: %d %s", status, body)
	}
	resp, body = e.previewGet(t, base+"8080/index.html", "alice", nil)
	if want := "project \"" + proj.Name + "\" is not running (its container serves port 8080 only while it runs): start it with POST /v1/projects/" + proj.Name + "/start"; resp.StatusCode != http.StatusServiceUnavailable || errorMessage(t, []byte(body)) != want {
		t.Fatalf("stopped project: %d %s, want 503 %q", resp.StatusCode, body, want)
	}
	// A device removed behind the daemon's back is back after a start.
	testkit.BehindTheBack(t, "remove a preview device", func() ([]byte, error) {
		return exec.Command("lxc", "config", "device", "remove", proj.Container, "remote-port-8080").CombinedOutput()
	})
	if status, body := e.do("POST", "/v1/projects/"+proj.Name+"/start", "alice", nil); status != http.StatusOK {
		t.Fatalf("start again: %d %s", status, body)
	}
	resp, body = e.previewGet(t, base+"8080/", "alice", nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.HasPrefix(errorMessage(t, []byte(body)), "nothing answered on port 8080 in project \""+proj.Name+"\"'s container: ") {
		t.Fatalf("nothing listening: %d %s", resp.StatusCode, body)
	}
	testkit.ServeHTTPD(t, e.lxd, proj.Container, 8080, "hello again\n")
	if resp, body := e.previewGet(t, base+"8080/", "alice", nil); resp.StatusCode != http.StatusOK || body != "hello again\n" {
		t.Fatalf("after restart: %d %q", resp.StatusCode, body)
	}
	// Ports removed: no device left, no socket file left.
	if status, body := e.do("PATCH", "/v1/projects/"+proj.Name, "alice", map[string]any{"ports": []int{}}); status != http.StatusOK {
		t.Fatalf("patch ports []: %d %s", status, body)
	}
	inst, _, _ = e.lxd.Instance(context.Background(), proj.Container)
	for name := range inst.Devices {
		if strings.HasPrefix(name, "remote-port-") {
			t.Fatalf("device %s left after ports []", name)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Fatalf("socket files left: %v", left)
	}
	var got api.Project
	_, body2 := e.do("GET", "/v1/projects/"+proj.Name, "alice", nil)
	if json.Unmarshal(body2, &got) != nil || got.Ports != nil {
		t.Fatalf("project after ports []: %s", body2)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
