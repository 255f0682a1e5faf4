package runner

import (
	"slices"
	"strings"
	"testing"

	"remote/providers"
)

func TestContainerCommand(t *testing.T) {
	t.Parallel()
	uid := uint32(1000)
	tests := []struct {
		name    string
		spec    ContainerSpec
		wantEnv []string
		wantDir string
	}{
		{
			name:    "defaults",
			spec:    ContainerSpec{Binary: "claude", Args: []string{"-p"}},
			wantEnv: []string{},
			wantDir: "/workspace",
		},
		{
			name:    "explicit cwd",
			spec:    ContainerSpec{Binary: "claude", Cwd: "/srv/app"},
			wantEnv: []string{},
			wantDir: "/srv/app",
		},
		{
			name: "precedence fixed < secrets < forced < runtime",
			spec: ContainerSpec{
				Binary: "claude",
				Fixed:  map[string]string{"A": "fixed", "B": "fixed", "C": "fixed", "D": "fixed"},
				Secrets: []providers.Secret{
					{Key: "B", Value: "secret"}, {Key: "C", Value: "secret"}, {Key: "D", Value: "secret"},
				},
				Forced:  map[string]string{"C": "forced", "D": "forced"},
				Runtime: map[string]string{"D": "runtime", "Z": "runtime", "M": "runtime"},
			},
			wantEnv: []string{"A=fixed", "B=secret", "C=forced", "D=runtime", "M=runtime", "Z=runtime"},
			wantDir: "/workspace",
		},
		{
			name: "runtime key masks a same-named secret",
			spec: ContainerSpec{
				Secrets: []providers.Secret{{Key: "TOKEN", Value: "project"}, {Key: "KEEP", Value: "k"}},
				Runtime: map[string]string{"TOKEN": "issued"},
			},
			wantEnv: []string{"KEEP=k", "TOKEN=issued"},
			wantDir: "/workspace",
		},
		{
			name: "runtime key masks a secret even when the runtime entry is dropped",
			spec: ContainerSpec{
				Fixed:   map[string]string{"HOME": "/root"},
				Secrets: []providers.Secret{{Key: "TOKEN", Value: "project"}, {Key: "HOME", Value: "/evil"}},
				Runtime: map[string]string{"TOKEN": "bad\x00value", "HOME": "bad\x00"},
			},
			wantEnv: []string{"HOME=/root"},
			wantDir: "/workspace",
		},
		{
			name: "excluded secrets",
			spec: ContainerSpec{
				Secrets:         []providers.Secret{{Key: "OPENAI_API_KEY", Value: "sk"}, {Key: "X", Value: "1"}},
				ExcludedSecrets: []string{"OPENAI_API_KEY"},
			},
			wantEnv: []string{"X=1"},
			wantDir: "/workspace",
		},
		{
			name: "invalid keys dropped in every layer",
			spec: ContainerSpec{
				Fixed:   map[string]string{"1BAD": "x", "OK_1": "y"},
				Secrets: []providers.Secret{{Key: "A-B", Value: "s"}, {Key: "A=B", Value: "s"}, {Key: "", Value: "s"}, {Key: "_s", Value: "v"}},
				Forced:  map[string]string{"sp ace": "f"},
				Runtime: map[string]string{"x\ny": "r", "R": "r"},
			},
			wantEnv: []string{"OK_1=y", "R=r", "_s=v"},
			wantDir: "/workspace",
		},
		{
			name: "secret value with NUL dropped, empty value kept",
			spec: ContainerSpec{
				Secrets: []providers.Secret{{Key: "NUL", Value: "a\x00b"}, {Key: "EMPTY", Value: ""}},
			},
			wantEnv: []string{"EMPTY="},
			wantDir: "/workspace",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.spec.UID = &uid
			cmd := ContainerCommand(tt.spec)
			if !slices.Equal(cmd.Env, tt.wantEnv) {
				t.Errorf("env = %q, want %q", cmd.Env, tt.wantEnv)
			}
			if cmd.Dir != tt.wantDir {
				t.Errorf("dir = %q, want %q", cmd.Dir, tt.wantDir)
			}
			if cmd.Path != tt.spec.Binary || !slices.Equal(cmd.Args, tt.spec.Args) || cmd.UID != &uid {
				t.Errorf("command = %+v", cmd)
			}
			for _, kv := range cmd.Env {
				if strings.Contains(kv, "\x00") {
					t.Errorf("NUL in env entry")
				}
			}
		})
	}
}

// The spec's Args are copied, so later changes by the caller do not leak
// into the command.
func TestContainerCommandCopiesArgs(t *testing.T) {
	t.Parallel()
	args := []string{"a", "b"}
	cmd := ContainerCommand(ContainerSpec{Binary: "x", Args: args})
	args[0] = "changed"
	if cmd.Args[0] != "a" {
		t.Fatal("args aliased")
	}
}
