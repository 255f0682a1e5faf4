package lxdconn

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"remote/internal/errdefs"
	"remote/internal/testkit"
	"remote/lxdexec"
)

func TestConnUnavailableUntilDialed(t *testing.T) {
	c := NewConn(nil)
	if _, _, err := c.Instance(context.Background(), "x"); !errors.Is(err, ErrUnavailable) || !errdefs.IsUnavailable(err) {
		t.Fatalf("before dial: %v, want ErrUnavailable", err)
	}
	// A socket that never answers: Dial keeps retrying until ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	c.Dial(ctx, lxdexec.Options{Socket: filepath.Join(t.TempDir(), "none.socket")}, testkit.Logger(t, "lxd"))
	if c.Client() != nil {
		t.Fatal("connected to a missing socket")
	}
	// The real LXD: Dial connects and calls go through.
	testkit.LXD(t)
	c.Dial(context.Background(), lxdexec.Options{}, testkit.Logger(t, "lxd"))
	if _, err := c.Instances(context.Background()); err != nil {
		t.Fatalf("after dial: %v", err)
	}
}
