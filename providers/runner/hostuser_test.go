package runner

import (
	"context"
	"os"
	"strings"
	"testing"

	"remote/providers"
)

type launcherFunc func(ctx context.Context, cmd providers.Command) (providers.Process, error)

func (f launcherFunc) Start(ctx context.Context, cmd providers.Command) (providers.Process, error) {
	return f(ctx, cmd)
}

func TestHostUserLauncher(t *testing.T) {
	var got providers.Command
	inner := launcherFunc(func(_ context.Context, cmd providers.Command) (providers.Process, error) {
		got = cmd
		return nil, nil
	})
	self, err := LookupHostUser("")
	if err != nil {
		t.Fatal(err)
	}
	HostUserLauncher(inner, self).Start(context.Background(), providers.Command{Env: []string{"HOME=/x"}})
	if got.UID != nil || got.GID != nil || got.Env[0] != "HOME=/x" {
		t.Errorf("own user: %+v", got)
	}
	other := HostUser{Name: "agent", UID: 4242, GID: 4343, Home: "/home/agent"}
	HostUserLauncher(inner, other).Start(context.Background(), providers.Command{Env: []string{"HOME=" + os.Getenv("HOME"), "PATH=/bin", "USER=custom"}})
	if got.UID == nil || *got.UID != 4242 || *got.GID != 4343 {
		t.Fatalf("credentials not set: %+v", got)
	}
	env := strings.Join(got.Env, " ")
	if !strings.Contains(env, "HOME=/home/agent") || !strings.Contains(env, "USER=custom") || !strings.Contains(env, "LOGNAME=agent") || !strings.Contains(env, "PATH=/bin") {
		t.Errorf("env %q", env)
	}
}
