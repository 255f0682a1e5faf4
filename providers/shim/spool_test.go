package shim

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func startSpool(t *testing.T, dir string, script string) *Client {
	t.Helper()
	cl, err := StartSpool(context.Background(), dial(t, dir), dir, Spec{Path: "sh", Args: []string{"-c", script},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"})
	if err != nil {
		t.Fatalf("StartSpool: %v", err)
	}
	return cl
}

// drainWithin is drain, failing the test after d.
func drainWithin(t *testing.T, cl *Client, d time.Duration) (string, string, ExitStatus, error) {
	t.Helper()
	type res struct {
		out, errOut string
		st          ExitStatus
		err         error
	}
	ch := make(chan res, 1)
	go func() {
		out, errOut, st, err := drain(t, cl)
		ch <- res{out, errOut, st, err}
	}()
	select {
	case r := <-ch:
		return r.out, r.errOut, r.st, r.err
	case <-time.After(d):
		t.Fatalf("the output did not end within %v", d)
		return "", "", ExitStatus{}, nil
	}
}

// TestSpoolRunReattachExactlyOnce: a spool run's CLI writes its spool
// files itself; a client that left and a new one that attaches from its
// offsets get every byte once, and a daemon of protocol version 1 gets
// the same bytes as frames.
func TestSpoolRunReattachExactlyOnce(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := startSpool(t, dir, `echo one; echo err1 >&2; read x; echo "got $x"; echo two`)
	if !cl.Info().Spool {
		t.Fatalf("info %+v: not a spool run", cl.Info())
	}
	go io.Copy(io.Discard, cl.Stderr())
	r := bufio.NewReader(cl.Stdout())
	if line, err := r.ReadString('\n'); line != "one\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	cl.Close()
	if _, err := cl.Wait(); !errors.Is(err, ErrLost) {
		t.Fatalf("Wait after Close = %v, want ErrLost", err)
	}
	if _, err := cl.Stdout().Read(make([]byte, 10)); !errors.Is(err, ErrLost) {
		t.Fatalf("read after Close = %v, want ErrLost", err)
	}

	// A version 1 client (a daemon from before spool runs) attached
	// meanwhile gets frames.
	old, err := Attach(context.Background(), dial(t, dir), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldErr := make(chan error, 1)
	go func() {
		_, _, _, err := drain(t, old)
		oldErr <- err
	}()

	cl2, err := AttachSpool(context.Background(), dial(t, dir), dir, 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	if info := cl2.Info(); !info.Spool || info.Exited || info.PID <= 0 {
		t.Fatalf("info %+v", info)
	}
	// A refused attach does not take the spooling from its holder.
	if _, err := AttachSpool(context.Background(), dial(t, dir), dir, 1<<20, 0); err == nil || !strings.Contains(err.Error(), "past the spools' ends") {
		t.Fatalf("attach past the end while a client holds the spooling: %v", err)
	}
	if _, err := cl2.WriteStdin([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	out, errOut, st, err := drainWithin(t, cl2, 20*time.Second)
	if err != nil || out != "got hi\ntwo\n" || errOut != "err1\n" || st.Code != 0 {
		t.Fatalf("out %q err %q status %+v wait %v", out, errOut, st, err)
	}
	if st.Stdout != 15 || st.Stderr != 5 {
		t.Fatalf("final sizes %d, %d; want 15, 5", st.Stdout, st.Stderr)
	}
	// cl2 replaced the version 1 client: it must not have been told of
	// an end it did not see.
	if err := <-oldErr; !errors.Is(err, ErrLost) {
		t.Fatalf("the replaced version 1 client ended with %v, want ErrLost", err)
	}

	// After the exit, a version 1 client replays everything as frames,
	// with an exit frame version 1 decodes (no sizes).
	cl3, err := Attach(context.Background(), dial(t, dir), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, st, err = drainWithin(t, cl3, 20*time.Second)
	if err != nil || out != "one\ngot hi\ntwo\n" || errOut != "err1\n" || st != (ExitStatus{}) {
		t.Fatalf("version 1 replay out %q err %q status %+v wait %v", out, errOut, st, err)
	}
	// And a version 2 one reads the files from its offsets.
	cl4, err := AttachSpool(context.Background(), dial(t, dir), dir, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, _, err = drainWithin(t, cl4, 20*time.Second)
	if err != nil || out != "one\ngot hi\ntwo\n" || errOut != "r1\n" {
		t.Fatalf("replay out %q err %q wait %v", out, errOut, err)
	}
	if _, err := AttachSpool(context.Background(), dial(t, dir), dir, 16, 0); err == nil || !strings.Contains(err.Error(), "past the spools' ends") {
		t.Fatalf("attach past the end: %v", err)
	}
}

// TestSpoolRunOutputEndsWithItsLastWriter: as with a pipe, the output of
// a process that inherited the CLI's stdout and outlives it is part of
// the run's, up to the moment it lets go.
func TestSpoolRunOutputEndsWithItsLastWriter(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{WaitDelay: 10 * time.Second})
	cl := startSpool(t, dir, `(sleep 0.5; echo late; echo late2 >&2) & echo early; exit 3`)
	out, errOut, st, err := drainWithin(t, cl, 20*time.Second)
	if err != nil || out != "early\nlate\n" || errOut != "late2\n" || st.Code != 3 {
		t.Fatalf("out %q err %q status %+v wait %v", out, errOut, st, err)
	}
}

// TestFaultSpoolsHeldAfterExit: a left-behind process holding both
// spools past WaitDelay does not hold the exit up.
func TestFaultSpoolsHeldAfterExit(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{WaitDelay: 300 * time.Millisecond})
	cl := startSpool(t, dir, "echo a; setsid sleep 1000.654 & exit 3")
	out, _, st, err := drainWithin(t, cl, 20*time.Second)
	if err != nil || out != "a\n" || st.Code != 3 {
		t.Fatalf("out %q status %+v, %v; want a, exit 3", out, st, err)
	}
	killByArg(t, "1000.654")
}

// killByArg kills this test's processes whose command line holds arg.
func killByArg(t *testing.T, arg string) {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), arg) {
			var pid int
			for _, c := range e.Name() {
				pid = pid*10 + int(c-'0')
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestAttackSpoolPlantedLinkOrFIFO: the daemon follows a spool run's
// files in the run directory. One replaced by a symbolic link to a file
// the daemon's user can read (a secret) is refused, never read; a FIFO
// is refused without the daemon blocking on its open.
func TestAttackSpoolPlantedLinkOrFIFO(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("token=hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []string{"symlink", "fifo"} {
		t.Run(plant, func(t *testing.T) {
			dir, _ := serveDir(t, ServeOptions{})
			cl := startSpool(t, dir, `read x`)
			defer cl.Release()
			path := filepath.Join(dir, StdoutName)
			if err := os.Rename(path, path+".moved"); err != nil {
				t.Fatal(err)
			}
			var err error
			if plant == "symlink" {
				err = os.Symlink(secret, path)
			} else {
				err = syscall.Mkfifo(path, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				c2, err := AttachSpool(context.Background(), dial(t, dir), dir, 0, 0)
				if err == nil {
					b := make([]byte, 64)
					n, _ := c2.Stdout().Read(b)
					c2.Close()
					err = errors.New("attached; read " + string(b[:n]))
				}
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "spool") {
					t.Fatalf("attach to a planted %s: %v", plant, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("attach blocked on a planted %s", plant)
			}
		})
	}
}

// TestAttachSpoolToAnOlderShim: a shim of protocol version 1 refuses
// the version 2 hello; the error says so (ErrVersion), so the daemon
// attaches again with version 1.
func TestAttachSpoolToAnOlderShim(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		r := bufio.NewReader(b)
		_, _ = r.ReadString('\n')
		_, _ = b.Write([]byte(`{"version":1,"stdinBytes":0,"error":"remote-shim protocol error: hello: protocol version 2, this shim speaks 1"}` + "\n"))
		b.Close()
	}()
	_, err := AttachSpool(context.Background(), a, t.TempDir(), 0, 0)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "protocol version 2, this shim speaks 1") {
		t.Fatalf("AttachSpool to a version 1 shim: %v", err)
	}
}

// TestAttachSpoolToAPipeRun: a version 2 client of a run started with
// pipes (a container's shim) gets frames.
func TestAttachSpoolToAPipeRun(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := start(t, dir, `echo one; echo e >&2`)
	cl.Close()
	cl2, err := AttachSpool(context.Background(), dial(t, dir), dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if cl2.Info().Spool {
		t.Fatalf("a pipe run says spool: %+v", cl2.Info())
	}
	out, errOut, st, err := drainWithin(t, cl2, 20*time.Second)
	if err != nil || out != "one\n" || errOut != "e\n" || st.Code != 0 {
		t.Fatalf("out %q err %q status %+v wait %v", out, errOut, st, err)
	}
}

// TestFaultSpoolUnwritable: when a splice into the spool fails (a full
// disk), the holder reads the rest from the pipe straight: the output
// still arrives whole and the CLI does not block on a full pipe.
func TestFaultSpoolUnwritable(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	cl := startSpool(t, dir, `i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done`)
	// The spool, read-only under the reader: every splice fails (EBADF).
	ro, err := os.Open(filepath.Join(dir, StdoutName))
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	cl.spools[0].fd = int(ro.Fd())
	out, _, st, err := drainWithin(t, cl, 30*time.Second)
	if err != nil || st.Code != 0 || strings.Count(out, "\n") != 3000 || !strings.HasSuffix(out, "line 2999\n") {
		t.Fatalf("%d lines, status %+v, %v", strings.Count(out, "\n"), st, err)
	}
	if !cl.spools[0].unspooled {
		t.Fatal("the reader did not fall back to the pipe")
	}
}

// TestSpoolHandOffsExactlyOnce: clients take the spooling over from each
// other and from the shim in the middle of a flood; what they read,
// stitched at each one's offset, and the spool file are the CLI's output
// byte for byte, none lost or repeated.
func TestSpoolHandOffsExactlyOnce(t *testing.T) {
	const lines = 100000
	dir, _ := serveDir(t, ServeOptions{})
	cl := startSpool(t, dir, `seq 1 100000`)
	var got []byte
	buf := make([]byte, 4096)
	for k := 0; ; k++ {
		go io.Copy(io.Discard, cl.Stderr())
		// Read a little (more each time), then leave mid-stream.
		var err error
		for n := 0; n < 20000*(k%3+1) && err == nil; {
			var m int
			m, err = cl.Stdout().Read(buf)
			got, n = append(got, buf[:m]...), n+m
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("client %d: %v", k, err)
		}
		cl.Close()
		if k%2 == 1 {
			time.Sleep(5 * time.Millisecond) //nolint:forbidigo // the shim splices meanwhile
		}
		var aerr error
		if cl, aerr = AttachSpool(context.Background(), dial(t, dir), dir, int64(len(got)), 0); aerr != nil {
			t.Fatal(aerr)
		}
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if string(got) != want.String() {
		t.Fatalf("read %d bytes, want %d: not the output once", len(got), want.Len())
	}
	if spool, _ := os.ReadFile(filepath.Join(dir, StdoutName)); string(spool) != want.String() {
		t.Fatalf("spool of %d bytes, want %d: not the output once", len(spool), want.Len())
	}
	if _, err := cl.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolConcurrentAttachesExactlyOnce: clients attach two at a time
// while others hold the spooling and splice a flood; each newer one
// waits for the holder to let go, so the spool stays the output once.
func TestSpoolConcurrentAttachesExactlyOnce(t *testing.T) {
	dir, _ := serveDir(t, ServeOptions{})
	// 300000 lines over about a second, in 30 bursts.
	cl := startSpool(t, dir, `i=0; while [ $i -lt 30 ]; do seq $((i*10000+1)) $((i*10000+10000)); sleep 0.03; i=$((i+1)); done`)
	read := func(c *Client) {
		go io.Copy(io.Discard, c.Stderr())
		io.Copy(io.Discard, c.Stdout()) // to the end, or until replaced
	}
	go read(cl)
	var wg sync.WaitGroup
	for k := 0; k < 8; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := AttachSpool(context.Background(), dial(t, dir), dir, 0, 0)
			if err != nil {
				t.Errorf("attach: %v", err)
				return
			}
			read(c)
			c.Close()
		}()
		if k%2 == 1 {
			time.Sleep(100 * time.Millisecond) //nolint:forbidigo // staggers the clients so some attach mid-splice: the subject
		}
	}
	wg.Wait()
	last, err := AttachSpool(context.Background(), dial(t, dir), dir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, _, st, err := drainWithin(t, last, 30*time.Second)
	var want strings.Builder
	for i := 1; i <= 300000; i++ {
		want.WriteString(strconv.Itoa(i) + "\n")
	}
	if err != nil || st.Code != 0 || out != want.String() {
		t.Fatalf("%d bytes read, want %d; status %+v, %v", len(out), want.Len(), st, err)
	}
	if spool, _ := os.ReadFile(filepath.Join(dir, StdoutName)); string(spool) != want.String() {
		t.Fatalf("spool of %d bytes, want %d: not the output once", len(spool), want.Len())
	}
}
