package systemd

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const childEnv = "REMOTE_SYSTEMD_ACTIVATION_CHILD"

// TestActivationChild is not a test: the activation tests re-execute the
// test binary with it, a socket as fd 3 and the activation environment.
// It reports what ActivatedListener returned on stdout, serves one
// connection, closes the listener and reports whether the socket file is
// still there.
func TestActivationChild(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("helper process for the activation tests")
	}
	if mode == "own-pid" {
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	}
	l, err := ActivatedListener()
	leftover := os.Getenv("LISTEN_PID") + os.Getenv("LISTEN_FDS") + os.Getenv("LISTEN_FDNAMES")
	switch {
	case errors.Is(err, ErrActivation):
		fmt.Printf("ErrActivation env=%q %v\n", leftover, err)
		return
	case err != nil:
		fmt.Printf("other error %v\n", err)
		return
	case l == nil:
		fmt.Printf("nil env=%q\n", leftover)
		return
	}
	ul, ok := l.(*net.UnixListener)
	fmt.Printf("listener unix=%v env=%q\n", ok, leftover)
	c, err := l.Accept()
	if err != nil {
		fmt.Printf("accept: %v\n", err)
		return
	}
	fmt.Fprintln(c, "hello from the activated daemon")
	c.Close()
	path := ul.Addr().String()
	l.Close()
	_, err = os.Stat(path)
	fmt.Printf("closed; socket file exists=%v\n", err == nil)
}

// runActivated starts the child with file as fd 3 and LISTEN_FDS=fds.
func runActivated(t *testing.T, file *os.File, fds string, mode string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestActivationChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "LISTEN_FDS="+fds, "LISTEN_FDNAMES=remoted.socket")
	if mode == "other-pid" {
		cmd.Env = append(cmd.Env, "LISTEN_PID=1")
	}
	if file != nil {
		cmd.ExtraFiles = []*os.File{file}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("child output: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

func TestActivatedListenerServesAndKeepsSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remoted.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	_, out := runActivated(t, f, "1", "own-pid")
	if got, want := readLine(t, out), `listener unix=true env=""`; got != want {
		t.Fatalf("child: %q, want %q", got, want)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	greeting, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || greeting != "hello from the activated daemon\n" {
		t.Fatalf("client read %q, %v", greeting, err)
	}
	if got, want := readLine(t, out), "closed; socket file exists=true"; got != want {
		t.Errorf("child: %q, want %q", got, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("socket file gone after the child closed its listener: %v", err)
	}
}

func TestActivatedListenerRejects(t *testing.T) {
	dir := t.TempDir()
	unixgram, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "dgram.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer unixgram.Close()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	listening, err := net.Listen("unix", filepath.Join(dir, "ok.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer listening.Close()
	regular, err := os.Create(filepath.Join(dir, "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer regular.Close()
	// A bound Unix stream socket that never listens.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(dir, "idle.sock")}); err != nil {
		t.Fatal(err)
	}
	idle := os.NewFile(uintptr(fd), "idle")
	defer idle.Close()

	fileOf := func(x interface{ File() (*os.File, error) }) *os.File {
		f, err := x.File()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	tests := []struct {
		name string
		file *os.File
		fds  string
		mode string
		want string
	}{
		{"datagram socket", fileOf(unixgram), "1", "own-pid", "ErrActivation"},
		{"tcp socket", fileOf(tcp.(*net.TCPListener)), "1", "own-pid", "ErrActivation"},
		{"regular file", regular, "1", "own-pid", "ErrActivation"},
		{"not listening", idle, "1", "own-pid", "ErrActivation"},
		{"two descriptors", fileOf(listening.(*net.UnixListener)), "2", "own-pid", "ErrActivation"},
		{"bad count", nil, "many", "own-pid", "ErrActivation"},
		{"zero", nil, "0", "own-pid", `nil env=""`},
		{"for another process", fileOf(listening.(*net.UnixListener)), "1", "other-pid", `nil env="11remoted.socket"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out := runActivated(t, tt.file, tt.fds, tt.mode)
			got := readLine(t, out)
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("child: %q, want prefix %q", got, tt.want)
			}
			if strings.HasPrefix(got, "ErrActivation") && !strings.HasPrefix(got, `ErrActivation env=""`) {
				t.Errorf("activation environment left behind after an error: %q", got)
			}
		})
	}
}

func TestActivatedListenerNotActivated(t *testing.T) {
	for _, pid := range []string{"", strconv.Itoa(os.Getpid())} {
		t.Setenv("LISTEN_PID", pid)
		t.Setenv("LISTEN_FDS", "")
		l, err := ActivatedListener()
		if l != nil || err != nil {
			t.Fatalf("LISTEN_PID=%q without LISTEN_FDS: ActivatedListener() = %v, %v; want nil, nil", pid, l, err)
		}
	}
}
