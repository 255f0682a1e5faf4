// Package runner owns how provider CLIs are run: the host and LXD exec
// implementations of providers.Launcher, RunProcess for line-oriented CLIs,
// and ContainerCommand, the pure assembly of a container command and its
// environment. It imports providers and lxdexec only.
package runner
