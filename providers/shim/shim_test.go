package shim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
)

// serveDir runs Serve in this process on a fresh run directory and
// returns it once it listens, with Serve's result channel.
func serveDir(t *testing.T, opts ServeOptions) (string, func() error) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runs", "r1")
	opts.Dir = dir
	ready := make(chan struct{})
	opts.Ready = func() { close(ready) }
	var logMu sync.Mutex
	logging := true
	opts.Logf = func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		if logging {
			t.Logf(format, args...)
		}
	}
	t.Cleanup(func() {
		logMu.Lock()
		logging = false
		logMu.Unlock()
	})
	done := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = Serve(opts)
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		t.Fatalf("Serve: %v", serveErr)
	}
	wait := func() error {
		<-done
		return serveErr
	}
	t.Cleanup(func() {
		// A test that did not release its shim: release it now.
		c, err := Dial(context.Background(), dir)
		switch {
		case errors.Is(err, ErrNoShim): // released, or ended
		case err != nil:
			t.Logf("cleanup: dial the shim: %v", err)
		default:
			if cl, err := Attach(context.Background(), c, 0, 0); err != nil {
				t.Logf("cleanup: attach: %v", err)
			} else if err := cl.Release(); err != nil {
				t.Logf("cleanup: release: %v", err)
			}
		}
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			// Every goroutine's stack says where Serve is stuck.
			buf := make([]byte, 1<<20)
			t.Errorf("Serve did not end after the release; goroutines:\n%s", buf[:runtime.Stack(buf, true)])
		}
	})
	return dir, wait
}

func dial(t *testing.T, dir string) io.ReadWriteCloser {
	t.Helper()
	c, err := Dial(context.Background(), dir)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return c
}

func start(t *testing.T, dir string, script string, env ...string) *Client {
	t.Helper()
	cl, err := Start(context.Background(), dial(t, dir), Spec{Path: "sh", Args: []string{"-c", script},
		Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...), Dir: "/"})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return cl
}

// drain reads a client's stdout and stderr to their end and waits.
func drain(t *testing.T, cl *Client) (string, string, ExitStatus, error) {
	t.Helper()
	errc := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(cl.Stderr())
		errc <- string(b)
	}()
	out, _ := io.ReadAll(cl.Stdout())
	st, err := cl.Wait()
	return string(out), <-errc, st, err
}

func TestSpoolOffsetsAndAttachAfterTheClientLeft(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := start(t, dir, `echo one; echo err1 >&2; read x; echo "got $x"; echo two`)
	go io.Copy(io.Discard, cl.Stderr()) // both streams are read, always
	r := bufio.NewReader(cl.Stdout())
	if line, err := r.ReadString('\n'); line != "one\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	// The daemon goes away; the CLI waits for stdin meanwhile.
	cl.Close()
	if _, err := cl.Wait(); !errors.Is(err, ErrLost) {
		t.Fatalf("Wait after Close = %v, want ErrLost", err)
	}

	// A new daemon attaches past the first line: it gets only what follows.
	cl2, err := Attach(context.Background(), dial(t, dir), 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info := cl2.Info(); info.PID <= 0 || info.Exited || info.StdinBytes != 0 || info.StdinClosed {
		t.Fatalf("info %+v", info)
	}
	if _, err := cl2.WriteStdin([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	out, errOut, st, err := drain(t, cl2)
	if err != nil || out != "got hi\ntwo\n" || errOut != "err1\n" || st.Code != 0 {
		t.Fatalf("out %q err %q status %+v wait %v", out, errOut, st, err)
	}
	spool, _ := os.ReadFile(filepath.Join(dir, StdoutName))
	if string(spool) != "one\ngot hi\ntwo\n" {
		t.Fatalf("stdout spool %q", spool)
	}
	exit, _ := os.ReadFile(filepath.Join(dir, ExitName))
	if string(exit) != `{"code":0}` {
		t.Fatalf("exit file %q", exit)
	}

	// A third attach, after the exit, replays everything and reports the
	// stdin received.
	cl3, err := Attach(context.Background(), dial(t, dir), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info := cl3.Info(); !info.Exited || info.StdinBytes != 3 {
		t.Fatalf("info after exit %+v", info)
	}
	out, errOut, _, err = drain(t, cl3)
	if err != nil || out != "one\ngot hi\ntwo\n" || errOut != "err1\n" {
		t.Fatalf("replay out %q err %q wait %v", out, errOut, err)
	}
	// Past the end is refused, naming why.
	if _, err := Attach(context.Background(), dial(t, dir), 100, 0); err == nil || !strings.Contains(err.Error(), "past the spools' ends") {
		t.Fatalf("attach past the end: %v", err)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   ExitStatus
		file   string
	}{
		{"exit 7", ExitStatus{Code: 7}, `{"code":7}`},
		{"kill -9 $$", ExitStatus{Code: 137, Signal: 9}, `{"code":137,"signal":9}`},
	} {
		t.Run(tc.script, func(t *testing.T) {
			dir, _ := serveDir(t, ServeOptions{})
			cl := start(t, dir, tc.script)
			cl.CloseStdin()
			_, _, st, err := drain(t, cl)
			if err != nil || st != tc.want {
				t.Fatalf("status %+v, %v; want %+v", st, err, tc.want)
			}
			if b, _ := os.ReadFile(filepath.Join(dir, ExitName)); string(b) != tc.file {
				t.Fatalf("exit file %q, want %q", b, tc.file)
			}
		})
	}
}

func TestStdinForwardingAndClose(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := start(t, dir, "cat; echo eof")
	big := strings.Repeat("x", 200<<10) + "\n" // several frames
	go func() {
		cl.WriteStdin([]byte("abc\n"))
		cl.WriteStdin([]byte(big))
		cl.CloseStdin()
		cl.CloseStdin() // idempotent
	}()
	out, _, st, err := drain(t, cl)
	if err != nil || st.Code != 0 || out != "abc\n"+big+"eof\n" {
		t.Fatalf("%d bytes out, status %+v, %v", len(out), st, err)
	}
	cl2, err := Attach(context.Background(), dial(t, dir), int64(len(out)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if info := cl2.Info(); !info.StdinClosed || info.StdinBytes != int64(4+len(big)) {
		t.Fatalf("info %+v", info)
	}
	cl2.Close()
}

func TestReleaseRemovesTheDirectory(t *testing.T) {
	dir, done := serveDir(t, ServeOptions{})
	cl := start(t, dir, "echo hi")
	cl.CloseStdin()
	if out, _, _, err := drain(t, cl); err != nil || out != "hi\n" {
		t.Fatalf("out %q, %v", out, err)
	}
	if err := cl.Release(); err != nil {
		t.Fatal(err)
	}
	if err := done(); err != nil {
		t.Fatalf("Serve after release: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run directory after release: %v", err)
	}
	if _, err := Dial(context.Background(), dir); !errors.Is(err, ErrNoShim) || !strings.Contains(err.Error(), "is gone") {
		t.Fatalf("Dial after release: %v", err)
	}
}

// TestReleaseWhileTheShimSendsIsNotLost: a daemon that releases a shim
// while the shim is still sending it output it will not read (a
// re-attach from 0 to a finished run, say) sends the release frame and
// closes. The shim's send then fails on the closed peer; the release
// already sent must still end the shim, not leave it lingering (24 h by
// default) with the run directory. Repeated: the send's failure and the
// release's read race.
func TestReleaseWhileTheShimSendsIsNotLost(t *testing.T) {
	for k := 0; k < 50; k++ {
		dir, done := serveDir(t, ServeOptions{Linger: time.Hour})
		cl := start(t, dir, "head -c 2000000 /dev/zero")
		if out, _, _, err := drain(t, cl); err != nil || len(out) != 2000000 {
			t.Fatalf("%d bytes, %v", len(out), err)
		}
		cl.Close()
		// From 0: more than the socket holds; nothing reads it.
		c, err := Attach(context.Background(), dial(t, dir), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(k%4) * time.Millisecond) //nolint:forbidigo // varies the release's timing against the flood: the subject
		if err := c.Release(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- done() }()
		select {
		case err := <-ended:
			if err != nil {
				t.Fatalf("Serve after the release: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("release %d: the shim did not end within a minute of it", k)
		}
	}
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// gone reports whether pid is gone (or a zombie).
func gone(pid int) func() bool { return func() bool { return !pidAlive(pid) } }

func TestSignalReachesAGrandchild(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	// The grandchild ignores nothing; the shell waits for it.
	cl := start(t, dir, `sleep 1000 & echo $!; wait`)
	go io.Copy(io.Discard, cl.Stderr())
	r := bufio.NewReader(cl.Stdout())
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !pidAlive(pid) {
		t.Fatalf("grandchild pid %q: %v", line, err)
	}
	if err := cl.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	st, err := cl.Wait()
	if err != nil || st.Code != 143 {
		t.Fatalf("status %+v, %v; want 143", st, err)
	}
	testkit.Eventually(t, 30*time.Second, gone(pid), "grandchild %d ends on SIGTERM to the group", pid)
}

func TestNoStartRequestRemovesTheDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	err := Serve(ServeOptions{Dir: dir, StartTimeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no start request within 100ms") {
		t.Fatalf("Serve = %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run directory: %v", err)
	}
}

func TestLingerEndsAnUnreleasedShim(t *testing.T) {
	dir, done := serveDir(t, ServeOptions{Linger: 100 * time.Millisecond})
	cl := start(t, dir, "echo hi")
	cl.CloseStdin()
	drain(t, cl)
	if err := done(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("run directory after the linger: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	if _, err := Attach(context.Background(), dial(t, dir), 0, 0); err == nil || !strings.Contains(err.Error(), "not started yet") {
		t.Fatalf("attach before start: %v", err)
	}
	cl := start(t, dir, "cat")
	defer cl.Close()
	if _, err := Start(context.Background(), dial(t, dir), Spec{Path: "true"}); err == nil || !strings.Contains(err.Error(), "already started") {
		t.Fatalf("second start: %v", err)
	}
	// The refused start leaves the running CLI alone: it was once taken
	// for a failed start, and the shim killed the CLI and removed its
	// directory.
	select {
	case <-cl.Done():
		t.Fatal("the running CLI's client ended after a refused second start")
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := cl.WriteStdin([]byte("still here\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(cl.Stdout()).ReadString('\n'); line != "still here\n" {
		t.Fatalf("the CLI after a refused second start: %q, %v", line, err)
	}
	if err := Serve(ServeOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second Serve on the same directory: %v", err)
	}
}

func TestStartFailureNamesTheCommand(t *testing.T) {
	dir, done := serveDir(t, ServeOptions{})
	_, err := Start(context.Background(), dial(t, dir), Spec{Path: "no-such-cli-here", Env: []string{"PATH=/nonexistent"}})
	if err == nil || !strings.Contains(err.Error(), `"no-such-cli-here" not found`) {
		t.Fatalf("Start = %v", err)
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
}

// TestSecretsStayOffDiskAndArgv: the start spec's environment reaches the
// CLI but neither the shim's command line nor any file of the run
// directory.
func TestSecretsStayOffDiskAndArgv(t *testing.T) {
	bin := testkit.ShimBinary(t)
	dir := filepath.Join(t.TempDir(), "r")
	if out, err := exec.Command(bin, "serve", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("serve --detach: %v\n%s", err, out)
	}
	const secret = "s3cr3t-value-4711"
	cl := start(t, dir, `echo "$TOKEN" | wc -c; cat`, "TOKEN="+secret)
	go io.Copy(io.Discard, cl.Stderr())
	r := bufio.NewReader(cl.Stdout())
	if line, _ := r.ReadString('\n'); strings.TrimSpace(line) != strconv.Itoa(len(secret)+1) {
		t.Fatalf("the CLI got TOKEN of %q bytes", line)
	}
	pid := readPID(t, dir)
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	environ, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if strings.Contains(string(cmdline), secret) || strings.Contains(string(environ), secret) {
		t.Fatal("the secret is in the shim's argv or environment")
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				t.Errorf("the secret is in %s", p)
			}
		}
		return nil
	})
	cl.CloseStdin()
	io.Copy(io.Discard, r)
	cl.Release()
}

func readPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, PIDName))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestFaultShimKilled: kill -9 of the shim takes the CLI and its group
// along (Pdeathsig), and the daemon's side learns the connection was lost.
func TestFaultShimKilled(t *testing.T) {
	bin := testkit.ShimBinary(t)
	dir := filepath.Join(t.TempDir(), "r")
	if out, err := exec.Command(bin, "serve", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("serve --detach: %v\n%s", err, out)
	}
	shimPID := readPID(t, dir)
	cl := start(t, dir, `echo $$; sleep 1000`)
	go io.Copy(io.Discard, cl.Stderr())
	r := bufio.NewReader(cl.Stdout())
	line, _ := r.ReadString('\n')
	cliPID, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !pidAlive(cliPID) {
		t.Fatalf("CLI pid %q: %v", line, err)
	}
	if err := syscall.Kill(shimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r)
	if _, err := cl.Wait(); !errors.Is(err, ErrLost) {
		t.Fatalf("Wait after the shim was killed = %v, want ErrLost", err)
	}
	testkit.Eventually(t, 30*time.Second, gone(cliPID), "the CLI (pid %d) ends with its killed shim", cliPID)
	if _, err := Dial(context.Background(), dir); !errors.Is(err, ErrNoShim) || !strings.Contains(err.Error(), "no shim answers on") {
		t.Fatalf("Dial after the kill: %v", err)
	}
	// attach removes what a dead shim left.
	out, err := exec.Command(bin, "attach", "--dir", dir).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != AttachExitNoShim || !strings.Contains(string(out), "no shim answers on") {
		t.Fatalf("attach to a dead shim: %v\n%s", err, out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dead shim's run directory is left: %v", err)
	}
}

// TestDetachedShimOutlivesItsStarter: serve --detach returns once the
// socket listens, and the server runs in a session of its own.
func TestDetachedShimOutlivesItsStarter(t *testing.T) {
	bin := testkit.ShimBinary(t)
	dir := filepath.Join(t.TempDir(), "r")
	cmd := exec.Command(bin, "serve", "--dir", dir, "--detach")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("serve --detach: %v\n%s", err, out)
	}
	pid := readPID(t, dir)
	if pid == cmd.Process.Pid {
		t.Fatal("the detached server is the process that was started")
	}
	sid, err := unixGetsid(pid)
	if err != nil || sid != pid {
		t.Fatalf("the server's session is %d (%v), want its own %d", sid, err, pid)
	}
	// Through attach, as in a container.
	att := exec.Command(bin, "attach", "--dir", dir)
	stdin, _ := att.StdinPipe()
	stdout, _ := att.StdoutPipe()
	if err := att.Start(); err != nil {
		t.Fatal(err)
	}
	cl, err := Start(context.Background(), pipeConn{stdout, stdin}, Spec{Path: "/bin/sh", Args: []string{"-c", "echo via attach"}})
	if err != nil {
		t.Fatal(err)
	}
	cl.CloseStdin()
	out, _, st, err := drain(t, cl)
	if err != nil || out != "via attach\n" || st.Code != 0 {
		t.Fatalf("out %q status %+v %v", out, st, err)
	}
	cl.Release()
	if err := att.Wait(); err != nil {
		t.Fatalf("attach after the release: %v", err)
	}
	testkit.Eventually(t, 30*time.Second, gone(pid), "the shim exits after its release")
	// A second serve of a fresh directory with a bad argument says why.
	out2, err := exec.Command(bin, "serve", "--dir", "relative", "--detach").CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "--dir must be an absolute path") {
		t.Fatalf("serve with a relative dir: %v %s", err, out2)
	}
}

type pipeConn struct {
	io.ReadCloser
	w io.WriteCloser
}

func (p pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p pipeConn) Close() error {
	p.w.Close()
	return p.ReadCloser.Close()
}

func unixGetsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}

// TestFaultBothPipesHeldAfterExit: the CLI exits while a process it left
// holds both its stdout and its stderr. The shim waits WaitDelay for them,
// then ends the group and records the exit. (It waited forever: the wait's
// timer fired once, for the first pipe only.)
func TestFaultBothPipesHeldAfterExit(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{WaitDelay: 300 * time.Millisecond})
	cl := start(t, dir, "sleep 1000.321 & exit 3")
	done := make(chan struct{})
	var st ExitStatus
	var err error
	go func() {
		defer close(done)
		_, _, st, err = drain(t, cl)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the exit was never recorded while a left-behind process held both pipes")
	}
	if err != nil || st.Code != 3 {
		t.Fatalf("status %+v, %v; want exit 3", st, err)
	}
}

// TestDemuxReadersOrder reads interleaved stdout and stderr in the ways a
// caller may: stderr first, then stdout (the stdout frames are read into
// memory for it), and both at once with a stdout reader that pauses
// longer than stealAfter between small reads.
func TestDemuxReadersOrder(t *testing.T) {
	const script = `i=0; while [ $i -lt 300 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done`
	var wantOut, wantErr strings.Builder
	for i := range 300 {
		fmt.Fprintf(&wantOut, "out%d\n", i)
		fmt.Fprintf(&wantErr, "err%d\n", i)
	}
	check := func(t *testing.T, out, errOut string, cl *Client) {
		t.Helper()
		if out != wantOut.String() || errOut != wantErr.String() {
			t.Errorf("stdout %d bytes, stderr %d bytes; want %d and %d in order", len(out), len(errOut), wantOut.Len(), wantErr.Len())
		}
		if st, err := cl.Wait(); err != nil || st.Code != 0 {
			t.Errorf("Wait = %+v, %v", st, err)
		}
	}
	t.Run("stderr first", func(t *testing.T) {
		dir, _ := serveDir(t, ServeOptions{})
		cl := start(t, dir, script)
		errOut, _ := io.ReadAll(cl.Stderr())
		out, _ := io.ReadAll(cl.Stdout())
		check(t, string(out), string(errOut), cl)
		cl.Release()
	})
	t.Run("slow stdout", func(t *testing.T) {
		dir, _ := serveDir(t, ServeOptions{})
		cl := start(t, dir, script)
		errc := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(cl.Stderr())
			errc <- string(b)
		}()
		var out []byte
		buf := make([]byte, 700)
		for {
			n, err := cl.Stdout().Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
			time.Sleep(stealAfter + time.Millisecond) //nolint:forbidigo // a slow reader, so the shim's steal deadline passes: the subject
		}
		check(t, string(out), <-errc, cl)
		cl.Release()
	})
}

// TestStdoutFloodLetsStderrReaderSleep: while stdout's reader keeps up
// with a flood of small frames and stderr is quiet, stderr's reader is
// not woken for each of stdout's frames (two goroutines passing every
// frame between them cost the daemon more than the frames: docs/benchmarks.md, "remote-shim").
// It wakes about once per stealAfter at most, to take over the
// connection should stdout's reader not come back.
func TestStdoutFloodLetsStderrReaderSleep(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	// 40000 lines, one write(2) each: thousands of frames.
	began := time.Now()
	cl := start(t, dir, `i=0; while [ $i -lt 40000 ]; do echo "line $i of a stdout flood"; i=$((i+1)); done`)
	out, errOut, st, err := drain(t, cl)
	took := time.Since(began)
	if err != nil || st.Code != 0 || errOut != "" || strings.Count(out, "\n") != 40000 {
		t.Fatalf("status %+v, %v; stderr %q; %d lines", st, err, errOut, strings.Count(out, "\n"))
	}
	cl.mu.Lock()
	wakes := cl.wakes
	cl.mu.Unlock()
	// Two per stealAfter, and some slack: a machine under load makes the
	// flood longer, not the bound tighter.
	if limit := 2*int(took/stealAfter) + 50; wakes[1] > limit {
		t.Fatalf("stderr's reader woke %d times in %v of a stdout flood (stdout's %d), want at most %d", wakes[1], took, wakes[0], limit)
	}
	t.Logf("wakes in %v: stdout %d, stderr %d", took, wakes[0], wakes[1])
	cl.Release()
}

// TestStderrPassesAStalledStdoutReader: stdout's reader takes a few bytes
// of a large frame and does not come back; stderr's reader, waiting
// already, still gets the stderr written after it, by reading the rest of
// that frame into memory once stdout's reader lags (stealAfter).
func TestStderrPassesAStalledStdoutReader(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := start(t, dir, `sleep 0.2; head -c 100000 /dev/zero | tr '\0' x; echo; echo err >&2`)
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 4)
		n, _ := io.ReadFull(cl.Stderr(), b)
		got <- string(b[:n])
	}()
	if _, err := io.ReadFull(cl.Stdout(), make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "err\n" {
			t.Fatalf("stderr %q, want %q", s, "err\n")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stderr never came past stdout's stalled reader")
	}
	if n, err := io.Copy(io.Discard, cl.Stdout()); err != nil || n != 100001-10 {
		t.Fatalf("rest of stdout: %d bytes, %v", n, err)
	}
	cl.Release()
}
