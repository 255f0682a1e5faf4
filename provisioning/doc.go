// Package provisioning owns project preparation (S9, S10, S12, S13): it
// reconciles a project's container (start, recreate when missing or
// replaced, boot.autostart), installs the provider CLI, pushes and syncs
// back credentials, publishes shared instructions, runtime assets, skills,
// the browser policy and scheduled tooling, and loads project secrets.
// Keeping stored project status true to LXD (autostart at daemon start,
// lifecycle events while running) is provisioning/reconcile's.
//
// It talks to LXD only through the small LXD interface (satisfied by
// *lxdexec.Client) and to storage through ProjectStore and SecretSource
// (satisfied by the daemon's store through thin adapters). It imports
// lxdexec, the providers' contracts and the API wire types — never daemon,
// never config (cmd/remoted converts config into Options).
package provisioning
