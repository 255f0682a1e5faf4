// Command remote-shim supervises one run's CLI so that the run outlives remoted
// (docs/architecture.md, "Runs that outlive the daemon"). remoted starts it per
// run; it is built static (CGO_ENABLED=0) so the same binary runs on the host
// and in any project container.
//
//	remote-shim serve --dir D [--detach] [--start-timeout 60s] [--linger 24h]
//	remote-shim attach --dir D
//	remote-shim version
//	remote-shim files stat|list|read|write|prune PATH [MAX | SIZE UID GID]
//
// serve creates run directory D and waits on D/shim.sock for the daemon's
// start request (the command, its environment and user travel over the
// socket, never in argv); --detach starts the server in a new session and
// exits once it listens. attach bridges stdin and stdout to D's socket (the
// daemon's way in from outside a container). The protocol and the layout
// of D are package remote/providers/shim's. files describes or reads one
// path for the project file routes without opening anything but a regular
// file (package remote/providers/shim/fsop).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"remote/internal/version"
	"remote/providers/shim"
	"remote/providers/shim/fsop"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage:
  remote-shim serve --dir D [--detach] [--start-timeout 60s] [--linger 24h]
  remote-shim attach --dir D
  remote-shim version
  remote-shim files stat|list|read|write|prune PATH [MAX | SIZE UID GID]
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "attach":
		return attach(args[1:], stdin, stdout, stderr)
	case "files":
		return fsop.Serve(args[1:], stdin, stdout)
	case "version":
		fmt.Fprintf(stdout, "remote-shim %s (protocol %d)\n", version.String(), shim.ProtocolVersion)
		return 0
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "remote-shim: unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func serve(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "run directory to create (absolute)")
	detach := fs.Bool("detach", false, "serve from a new session and exit once the socket listens")
	startTimeout := fs.Duration("start-timeout", shim.DefaultStartTimeout, "how long to wait for the start request")
	linger := fs.Duration("linger", shim.DefaultLinger, "how long to wait for a release after the CLI exited")
	readyFD := fs.Int("ready-fd", 0, "internal: file descriptor to report readiness on")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "remote-shim serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *dir == "" || !filepath.IsAbs(*dir) {
		fmt.Fprintf(stderr, "remote-shim serve: --dir must be an absolute path, got %q\n", *dir)
		return 2
	}
	if *detach {
		return detachServe(*dir, *startTimeout, *linger, stderr)
	}
	logger := log.New(stderr, "remote-shim: ", 0)
	var ready *os.File
	if *readyFD > 0 {
		ready = os.NewFile(uintptr(*readyFD), "ready")
	}
	syscall.Umask(0o077)
	runtime.GOMAXPROCS(1)
	err := shim.Serve(shim.ServeOptions{
		Dir: *dir, StartTimeout: *startTimeout, Linger: *linger, Subreaper: true,
		Logf: logger.Printf,
		Ready: func() {
			notifySystemd()
			if ready != nil {
				_, _ = io.WriteString(ready, "ok\n")
				ready.Close()
				ready = nil
			}
		},
	})
	if err != nil {
		if ready != nil {
			_, _ = io.WriteString(ready, "error: "+err.Error()+"\n")
			ready.Close()
		}
		logger.Printf("%v", err)
		return 1
	}
	return 0
}

// notifySystemd tells systemd the shim is ready when it runs as a
// transient unit of Type=notify (the daemon's start job then completes).
func notifySystemd() {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	_, _ = c.Write([]byte("READY=1"))
}

// detachServe re-executes the shim in a new session with its stdio on
// /dev/null and returns once that server listens, so that whatever
// started this process (an LXD exec) can end while the shim lives on.
func detachServe(dir string, startTimeout, linger time.Duration, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "remote-shim serve: find own executable: %v\n", err)
		return 1
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(stderr, "remote-shim serve: %v\n", err)
		return 1
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(stderr, "remote-shim serve: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, "serve", "--dir", dir, "--ready-fd", "3",
		"--start-timeout", startTimeout.String(), "--linger", linger.String())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "remote-shim serve: start the server: %v\n", err)
		return 1
	}
	pw.Close()
	null.Close()
	msg, _ := io.ReadAll(io.LimitReader(pr, 4096))
	pr.Close()
	if strings.TrimSpace(string(msg)) != "ok" {
		_ = cmd.Wait()
		detail := strings.TrimSpace(strings.TrimPrefix(string(msg), "error: "))
		if detail == "" {
			detail = "the server ended before it listened"
		}
		fmt.Fprintf(stderr, "remote-shim serve: %s\n", detail)
		return 1
	}
	_ = cmd.Process.Release()
	return 0
}

func attach(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("attach", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "run directory of the shim")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || !filepath.IsAbs(*dir) {
		fmt.Fprintf(stderr, "remote-shim attach: --dir must be an absolute path, got %q\n", *dir)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := shim.Dial(ctx, *dir)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "remote-shim attach: %v\n", err)
		if errors.Is(err, shim.ErrNoShim) {
			removeStale(*dir)
			return shim.AttachExitNoShim
		}
		return 1
	}
	defer conn.Close()
	go func() {
		_, _ = io.Copy(conn, stdin)
		// The daemon closed its end: it left.
		conn.Close()
	}()
	_, err = io.Copy(stdout, conn)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		fmt.Fprintf(stderr, "remote-shim attach: %v\n", err)
		return 1
	}
	return 0
}

// removeStale removes a run directory whose shim is dead (its socket
// refuses and its pid is gone): after a container restart nothing would
// ever remove it.
func removeStale(dir string) {
	b, err := os.ReadFile(filepath.Join(dir, shim.PIDName))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	if !alive(pid) {
		_ = os.RemoveAll(dir)
	}
}

// alive reports whether pid exists and is not a zombie (a killed shim
// whose parent does not reap it).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrPermission)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
