// Package preview owns a project's port previews on the LXD side: the
// proxy devices (remote-port-<port>) that listen on a host Unix socket
// only the daemon's uid may use and connect to the port on the
// container's loopback, their socket paths under the preview directory,
// and removing the sockets LXD leaves behind. provisioning.Preparer holds
// a Devices and calls it with the container's lifecycle lock held.
//
// It imports lxdexec and api only, and must never import provisioning
// (which imports it), providers, the daemon or config.
package preview
