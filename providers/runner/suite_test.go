package runner

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

// launcherSuite is the behaviour every providers.Launcher must show, run
// against HostLauncher and LXDLauncher alike. Each
// command is a sh script, which both the host and the busybox test image
// have.
func launcherSuite(t *testing.T, l providers.Launcher, basePath string) {
	launcherSuiteCtx(t, l, basePath, nil)
}

// launcherSuiteCtx is launcherSuite with every Start's context passed
// through wrap (e.g. to make it a shimmed run's main process).
func launcherSuiteCtx(t *testing.T, l providers.Launcher, basePath string, wrap func(context.Context) context.Context) {
	if wrap == nil {
		wrap = func(ctx context.Context) context.Context { return ctx }
	}
	sh := func(script string, env ...string) providers.Command {
		return providers.Command{Path: "sh", Args: []string{"-c", script}, Env: append([]string{"PATH=" + basePath}, env...), Dir: "/"}
	}
	ctx := context.Background()
	run := func(t *testing.T, cmd providers.Command, stdin string) (string, string, error) {
		t.Helper()
		p, err := l.Start(wrap(ctx), cmd)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		go func() {
			io.WriteString(p.Stdin(), stdin)
			p.Stdin().Close()
		}()
		errc := make(chan string, 1)
		go func() {
			b, _ := io.ReadAll(p.Stderr())
			errc <- string(b)
		}()
		out, _ := io.ReadAll(p.Stdout())
		stderr := <-errc
		return string(out), stderr, p.Wait()
	}

	t.Run("stdin to stdout, stderr apart", func(t *testing.T) {
		out, errOut, err := run(t, sh("cat; echo to-err >&2"), "hello\nworld\n")
		if err != nil || out != "hello\nworld\n" || errOut != "to-err\n" {
			t.Fatalf("out %q err %q wait %v", out, errOut, err)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		_, _, err := run(t, sh("exit 7"), "")
		var ee *providers.ExitError
		if !errors.As(err, &ee) || ee.Code != 7 {
			t.Fatalf("Wait = %v, want exit 7", err)
		}
	})
	t.Run("environment and directory", func(t *testing.T) {
		cmd := sh(`echo "$ONE $TWO"; pwd`, "ONE=1", "TWO=two words")
		cmd.Dir = "/tmp"
		out, _, err := run(t, cmd, "")
		if err != nil || out != "1 two words\n/tmp\n" {
			t.Fatalf("out %q wait %v", out, err)
		}
	})
	t.Run("a megabyte of output", func(t *testing.T) {
		out, _, err := run(t, sh("line=$(printf %01023d 0); i=0; while [ $i -lt 1000 ]; do echo $line; i=$((i+1)); done"), "")
		if err != nil || len(out) != 1000*1024 {
			t.Fatalf("%d bytes, wait %v", len(out), err)
		}
	})
	t.Run("cancel stops the command", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		p, err := l.Start(wrap(ctx), sh("echo ready; sleep 60"))
		if err != nil {
			t.Fatal(err)
		}
		p.Stdin().Close()
		go io.Copy(io.Discard, p.Stderr())
		r := bufio.NewReader(p.Stdout())
		if line, _ := r.ReadString('\n'); line != "ready\n" {
			t.Fatalf("first line %q", line)
		}
		cancel()
		io.Copy(io.Discard, r)
		if err := p.Wait(); err == nil {
			t.Fatal("a cancelled sleep 60 exited 0")
		}
	})
}

func TestLauncherSuiteHost(t *testing.T) {
	t.Parallel()
	launcherSuite(t, &HostLauncher{}, os.Getenv("PATH"))
}

func TestLauncherSuiteLXD(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rsuite")
	launcherSuite(t, (&LXDLauncher{Client: client}).Container(name), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}
