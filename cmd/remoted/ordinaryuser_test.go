package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
)

// TestOrdinaryUserDaemon runs remoted as an ordinary user (nobody, uid
// 65534), as `make run` does: that user may connect and may name the
// acting user in X-Remote-User (the rule is the daemon's own uid, which
// tests run as root collapse into uid 0); another ordinary user listed
// in allow_uids (daemon, uid 1) may connect but acts only as itself, a
// header naming alice refused; an unlisted one (uid 65533) may not
// connect. The clients are curl processes under those uids, so the
// daemon reads their real peer credentials.
func TestOrdinaryUserDaemon(t *testing.T) {
	testkit.NeedsRoot(t, "running remoted and its clients as other users")
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed as the clients of other uids")
	}
	const nobody = 65534
	other, err := user.LookupId("1") // Debian's base-passwd: daemon
	if err != nil {
		t.Fatalf("uid 1 (daemon) is needed as an allowed ordinary user with a login name: %v", err)
	}
	dir, err := os.MkdirTemp("", "rdnobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(buildRemoted(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "remoted")
	sock := filepath.Join(dir, "remoted.sock")
	cfg := filepath.Join(dir, "remoted.toml")
	for p, content := range map[string]string{
		bin: string(data),
		cfg: fmt.Sprintf("[daemon]\nsocket = %q\nstate_dir = %q\nallow_uids = [1]\n[lxd]\nsocket = \"/nonexistent/lxd/unix.socket\"\n[agent]\nallowed_roots = [%q]\n",
			sock, filepath.Join(dir, "state"), dir),
	} {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, bin, cfg} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil { // others reach the socket; the peer check decides
		t.Fatal(err)
	}
	var logs syncBuffer
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	cmd.Stderr = &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })

	// curlAs sends one request as uid, naming user, and returns "STATUS BODY".
	curlAs := func(uid uint32, user, method, path, body string) string {
		t.Helper()
		args := []string{"-s", "--unix-socket", sock, "-X", method, "-H", "X-Remote-User: " + user, "-w", "\n%{http_code}"}
		if body != "" {
			args = append(args, "-H", "Content-Type: application/json", "--data", body)
		}
		c := exec.Command("curl", append(args, "http://remoted"+path)...)
		c.Dir = dir
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, _ := c.Output()
		s := string(out)
		i := strings.LastIndexByte(s, '\n')
		if i < 0 {
			return s
		}
		return s[i+1:] + " " + s[:i]
	}
	if testkit.Poll(30*time.Second, func() bool { return strings.HasPrefix(curlAs(nobody, "alice", "GET", "/v1/info", ""), "200 ") }) != nil {
		t.Fatalf("remoted as nobody did not answer its own user:\n%s", logs.String())
	}
	if got := curlAs(nobody, "alice", "POST", "/v1/chats", fmt.Sprintf(`{"provider":"claude","cwd":%q}`, dir)); !strings.HasPrefix(got, "201 ") || !strings.Contains(got, `"owner":"alice"`) {
		t.Errorf("the daemon's own user naming alice: %s; want 201 and a chat owned by alice\n%s", got, logs.String())
	}
	// Open the socket file to everyone, so only the peer check can refuse.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	if got := curlAs(65533, "alice", "GET", "/v1/info", ""); !strings.HasPrefix(got, "403 ") {
		t.Errorf("another ordinary user: %s; want 403", got)
	}
	// An allowed ordinary user is itself: naming alice is refused, naming
	// itself (or no one) is fine.
	if got, want := curlAs(1, "alice", "POST", "/v1/chats", fmt.Sprintf(`{"provider":"claude","cwd":%q}`, dir)), `X-Remote-User \"alice\" refused: uid 1 (`+other.Username+`) may act only as itself`; !strings.HasPrefix(got, "403 ") || !strings.Contains(got, want) {
		t.Errorf("allowed uid 1 naming alice: %s; want 403 saying %s", got, want)
	}
	if got := curlAs(1, other.Username, "POST", "/v1/chats", fmt.Sprintf(`{"provider":"claude","cwd":%q}`, dir)); !strings.HasPrefix(got, "201 ") || !strings.Contains(got, `"owner":"`+other.Username+`"`) {
		t.Errorf("allowed uid 1 acting as itself: %s; want 201 and a chat owned by %s", got, other.Username)
	}
}
