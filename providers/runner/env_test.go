package runner

import (
	"slices"
	"testing"
)

func TestHostEnv(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin", "HOME=/root", "LANG=C.UTF-8", "LC_ALL=C", "TZ=UTC", "TERM=xterm",
		"USER=root", "LOGNAME=root", "SHELL=/bin/sh",
		"ANTHROPIC_API_KEY=sk-daemon", "REMOTE_TOKEN=secret", "AWS_SECRET_ACCESS_KEY=x",
		"NOTIFY_SOCKET=/run/x", "malformed",
	}
	got := hostEnv(base, map[string]string{
		"HOME": "/tmp/h", "IS_SANDBOX": "1", "bad-key": "v", "OPENAI_API_KEY": "",
	})
	want := []string{
		"HOME=/tmp/h", "IS_SANDBOX=1", "LANG=C.UTF-8", "LC_ALL=C", "LOGNAME=root",
		"OPENAI_API_KEY=", "PATH=/usr/bin", "SHELL=/bin/sh", "TERM=xterm", "TZ=UTC", "USER=root",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("hostEnv =\n%q\nwant\n%q", got, want)
	}
	if env := HostEnv(nil); !slices.IsSorted(env) {
		t.Fatalf("HostEnv not sorted: %q", env)
	}
}

func TestValidEnvKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]bool{
		"A": true, "_x": true, "PATH": true, "a1_B2": true,
		"": false, "1A": false, "A-B": false, "A=B": false, "A B": false, "É": false, "A\n": false,
	} {
		if got := ValidEnvKey(key); got != want {
			t.Errorf("ValidEnvKey(%q) = %v, want %v", key, got, want)
		}
	}
}
