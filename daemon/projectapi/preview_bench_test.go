package projectapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"remote/api"
	"remote/internal/testkit"
)

// BenchmarkPreview is one small GET (busybox httpd's 1 KiB page in the
// container): "remote" through the daemon's route (ownership check,
// reverse proxy, LXD's proxy device), "socket" straight on the proxy
// device's Unix socket, what a hand-made `lxc config device add … proxy`
// and `curl --unix-socket` give (docs/benchmarks.md).
func BenchmarkPreview(b *testing.B) {
	dir, err := os.MkdirTemp("", "pvb")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	e := newProjectEnv(b, projectEnvOpts{previewDir: dir})
	status, body := e.do("POST", "/v1/projects", "alice", api.CreateProjectRequest{Name: uniqueProject("pvbench"), Ports: []int{8080}})
	if status != http.StatusCreated {
		b.Fatalf("create: %d %s", status, body)
	}
	var p api.Project
	if err := json.Unmarshal(body, &p); err != nil {
		b.Fatal(err)
	}
	testkit.CleanupContainer(b, e.lxd, p.Container)
	if status, body := e.do("POST", "/v1/projects/"+p.Name+"/start", "alice", nil); status != http.StatusOK {
		b.Fatalf("start: %d %s", status, body)
	}
	page := make([]byte, 1024)
	for i := range page {
		page[i] = 'a' + byte(i%26)
	}
	testkit.ServeHTTPD(b, e.lxd, p.Container, 8080, string(page))
	sock := filepath.Join(dir, p.ID+"-8080.sock")
	direct := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	get := func(b *testing.B, c *http.Client, u string, user bool) {
		req, _ := http.NewRequest("GET", u, nil)
		if user {
			req.Header.Set(api.HeaderUser, "alice")
		}
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n != int64(len(page)) {
			b.Fatalf("GET %s: %d, %d bytes", u, resp.StatusCode, n)
		}
	}
	b.Run("remote", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, e.client, "http://remoted/v1/projects/"+p.Name+"/ports/8080/index.html", true)
		}
	})
	b.Run("socket", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, direct, "http://localhost:8080/index.html", false)
		}
	})
}
