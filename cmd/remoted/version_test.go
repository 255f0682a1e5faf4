package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"remote/api"
	"remote/internal/testkit"
)

// TestInfoReportsStampedVersion builds remoted with the version stamp make
// build passes (-ldflags -X remote/internal/version.stamped=<git describe>)
// and checks both places an operator reads it: remoted -version and the
// "version" of GET /v1/info.
func TestInfoReportsStampedVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a stamped remoted (make test runs it)")
	}
	const stamp = "v0.9.1-14-gd6cdcc3-dirty"
	dir, err := os.MkdirTemp("", "rdver")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not in PATH (go test puts it there): %v", err)
	}
	bin := filepath.Join(dir, "remoted")
	build := exec.Command(goBin, "build", "-ldflags", "-X remote/internal/version.stamped="+stamp, "-o", bin, "remote/cmd/remoted")
	build.Dir = testkit.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	out, err := exec.Command(bin, "-version").Output()
	if err != nil || string(out) != "remoted "+stamp+"\n" {
		t.Fatalf("remoted -version: %q, %v; want %q", out, err, "remoted "+stamp+"\n")
	}

	sock := filepath.Join(dir, "remoted.sock")
	cfg := fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\n[lxd]\nsocket = %q\n[agent]\nallowed_roots = [%q]\n",
		sock, filepath.Join(dir, "state"), filepath.Join(dir, "no-lxd.sock"), dir)
	d := newDaemon(t, bin, cfg, sock)
	d.start()
	st, body := d.do("GET", "/v1/info", nil)
	var info api.Info
	if err := json.Unmarshal(body, &info); st != 200 || err != nil {
		t.Fatalf("GET /v1/info: %d %s", st, body)
	}
	if info.Version != stamp {
		t.Errorf("GET /v1/info version = %q, want %q (body %s)", info.Version, stamp, body)
	}
	d.cmd.Process.Signal(os.Interrupt)
	d.cmd.Wait()
}
