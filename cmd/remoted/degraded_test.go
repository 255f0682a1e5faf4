package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
)

// TestDegradedStartRecovers starts remoted while its LXD socket answers
// nothing: it serves in degraded mode (info unreachable, project routes
// 503), and once LXD appears at that path it reconnects by itself — info
// reachable, project routes served — without a restart.
func TestDegradedStartRecovers(t *testing.T) {
	testkit.LXD(t)
	real, err := lxdexec.DiscoverSocket()
	if err != nil {
		testkit.Missing(t, "lxd socket: %v", err)
	}
	dir, err := os.MkdirTemp("", "rddeg")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "remoted.sock")
	lxdSock := filepath.Join(dir, "lxd.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n[lxd]\nsocket = %q\n[agent]\nallowed_roots = [%q]\n",
		sock, filepath.Join(dir, "state"), lxdSock, dir)
	d := newDaemon(t, buildRemoted(t), cfg, sock)
	d.start()
	defer func() {
		d.cmd.Process.Kill()
		d.cmd.Wait()
	}()

	var info api.Info
	_, body := d.do("GET", "/v1/info", nil)
	if err := json.Unmarshal(body, &info); err != nil || info.LXD.Reachable {
		t.Fatalf("info before LXD: %s", body)
	}
	name := testkit.ContainerName("deg")
	if st, body := d.do("POST", "/v1/projects", api.CreateProjectRequest{Name: name}); st != 201 {
		t.Fatalf("create project while LXD is unreachable: %d %s", st, body)
	}
	if st, body := d.do("POST", "/v1/projects/"+name+"/start", nil); st != 503 {
		t.Fatalf("start while LXD is unreachable: %d %s, want 503", st, body)
	}

	// LXD "comes back": a proxy to the real socket appears at the path.
	ln, err := net.Listen("unix", lxdSock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", real)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
	testkit.Eventually(t, 60*time.Second, func() error {
		_, body = d.do("GET", "/v1/info", nil)
		if json.Unmarshal(body, &info) != nil || !info.LXD.Reachable {
			return fmt.Errorf("info %s\n%s", body, d.logs)
		}
		return nil
	}, "LXD reachable again")
	defer d.do("DELETE", "/v1/projects/"+name+"?purge=true", nil)
	if st, body := d.do("POST", "/v1/projects/"+name+"/start", nil); st/100 != 2 {
		t.Fatalf("start after LXD came back: %d %s\n%s", st, body, d.logs)
	}
}
