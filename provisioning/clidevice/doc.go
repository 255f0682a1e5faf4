// Package clidevice owns how a CLI store version reaches a project's
// container: read-only LXD disk devices for the version directory (and
// the store's glibc for containers without one) plus a link on the PATH,
// the removal of earlier versions' mounts no process runs from, and the
// push fallback where LXD cannot mount the host path. provisioning.Steps
// holds a Device and decides when the store applies (ensureStoreCLI).
//
// It imports lxdexec and providers/clistore (the store's versions) only,
// and must never import provisioning (which imports it), the runner, an
// adapter, the daemon or config.
package clidevice
