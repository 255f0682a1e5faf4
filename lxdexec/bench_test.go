package lxdexec_test

import (
	"context"
	"io"
	"os/exec"
	"testing"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// benchExec runs argv through lxdexec, discarding output, and fails on a
// non-zero exit.
func benchExec(b *testing.B, c *lxdexec.Client, name string, argv ...string) {
	e, err := c.Exec(context.Background(), name, lxdexec.ExecRequest{Command: argv})
	if err != nil {
		b.Fatal(err)
	}
	_ = e.Stdin().Close()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, e.Stderr()); close(done) }()
	if _, err := io.Copy(io.Discard, e.Stdout()); err != nil {
		b.Fatal(err)
	}
	<-done
	if code, err := e.Wait(); err != nil || code != 0 {
		b.Fatalf("exit %d, %v", code, err)
	}
}

// benchLXC runs argv through `lxc exec`, the alternative a user would pick.
func benchLXC(b *testing.B, name string, argv ...string) {
	cmd := exec.Command("lxc", append([]string{"exec", name, "--force-noninteractive", "--"}, argv...)...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Run(); err != nil {
		b.Fatal(err)
	}
}

func benchBoth(b *testing.B, bytes int64, argv ...string) {
	c := testkit.LXD(b)
	name := testkit.NewContainer(b, c, "bench")
	b.Run("lxdexec", func(b *testing.B) {
		b.SetBytes(bytes)
		for b.Loop() {
			benchExec(b, c, name, argv...)
		}
	})
	b.Run("lxc", func(b *testing.B) {
		if _, err := exec.LookPath("lxc"); err != nil {
			b.Skip("lxc not installed")
		}
		b.SetBytes(bytes)
		for b.Loop() {
			benchLXC(b, name, argv...)
		}
	})
}

// BenchmarkExecStart measures the latency of running `true`.
func BenchmarkExecStart(b *testing.B) { benchBoth(b, 0, "true") }

// BenchmarkExecThroughput measures streaming 256 MiB of stdout (busybox
// head wants a lowercase size suffix).
func BenchmarkExecThroughput(b *testing.B) {
	benchBoth(b, 256<<20, "head", "-c", "256m", "/dev/zero")
}
