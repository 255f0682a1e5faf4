// Package provisioning owns project preparation: reconciling a project's
// container (start, recreate, autostart), installing the provider CLI,
// pushing credentials, publishing instructions, runtime assets and skills, and
// loading project secrets. It imports lxdexec and the providers' contracts,
// never daemon.
package provisioning
