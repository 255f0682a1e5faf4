package runner

import (
	"strings"

	"remote/providers"
)

// DefaultContainerCwd is the working directory of a container command when
// the spec names none.
const DefaultContainerCwd = "/workspace"

// ContainerSpec is what an adapter knows about one command to run inside a
// project container (S11).
type ContainerSpec struct {
	Binary string   // the CLI; a bare name is resolved inside the container
	Args   []string // its arguments
	Cwd    string   // working directory; DefaultContainerCwd when empty
	// The four environment layers, later wins: provider fixed entries,
	// project secrets, provider-forced entries, backend runtime variables.
	Fixed   map[string]string
	Secrets []providers.Secret
	Forced  map[string]string
	Runtime map[string]string
	// ExcludedSecrets names secrets the provider never lets through (for
	// example a key variable it manages itself).
	ExcludedSecrets []string
	UID, GID        *uint32
}

// ContainerCommand assembles the command for a container run: cwd
// DefaultContainerCwd unless set, and the environment merged from the
// spec's layers in precedence order (fixed < secrets < forced < runtime).
//
// A runtime key masks the project secret of the same name even when the
// runtime entry itself is dropped as invalid, so a secret can never stand
// in for a backend-issued variable. Entries whose key does not match
// ^[A-Za-z_][A-Za-z0-9_]*$, or whose value holds a NUL byte, are dropped
// silently: values are never echoed in an error. The environment is
// returned sorted by key with each key once.
func ContainerCommand(spec ContainerSpec) providers.Command {
	env := make(map[string]string, len(spec.Fixed)+len(spec.Secrets)+len(spec.Forced)+len(spec.Runtime))
	put := func(k, v string) {
		if ValidEnvKey(k) && !strings.ContainsRune(v, 0) {
			env[k] = v
		}
	}
	for k, v := range spec.Fixed {
		put(k, v)
	}
	masked := make(map[string]bool, len(spec.Runtime)+len(spec.ExcludedSecrets))
	for k := range spec.Runtime {
		masked[k] = true
	}
	for _, k := range spec.ExcludedSecrets {
		masked[k] = true
	}
	for _, s := range spec.Secrets {
		if !masked[s.Key] {
			put(s.Key, s.Value)
		}
	}
	for k, v := range spec.Forced {
		put(k, v)
	}
	// An invalid runtime entry is dropped here but already masked its
	// secret above; fixed and forced entries are the provider's own and stay.
	for k, v := range spec.Runtime {
		put(k, v)
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = DefaultContainerCwd
	}
	return providers.Command{
		Path: spec.Binary,
		Args: append([]string(nil), spec.Args...),
		Env:  envList(env),
		Dir:  cwd,
		UID:  spec.UID,
		GID:  spec.GID,
	}
}
