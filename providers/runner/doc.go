// Package runner owns how provider CLIs are run: HostLauncher (os/exec, a
// process group per child, SIGTERM then SIGKILL on cancel) and LXDLauncher
// (LXD exec through lxdexec, never the lxc binary), both implementations of
// providers.Launcher; HostEnv, the filtered environment of a host run;
// RunProcess, the S15 loop for line-oriented CLIs; ContainerCommand, the
// pure S11 assembly of a container command and its environment; and the
// steps every adapter shares around them: PrepareProject and ResolveLaunch
// (where and how a turn runs), SyncCredentials (S12),
// TruncateOutput, HostDefaults and AdapterLogger; and who host runs run as:
// LookupHostUser and HostUserLauncher ([agent] host_user). Readiness
// probes and CLI login moved to providers/probe, which imports runner.
//
// It imports providers and lxdexec only, and must never import the daemon,
// the store, the transport, any adapter or providers/probe.
package runner
