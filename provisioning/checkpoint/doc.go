// Package checkpoint owns a project's checkpoints (LXD snapshots named
// rc-<chat>-<seq>): the one taken before a turn (WithTurn, Manager.Take),
// retention in the background (Keep, one prune run per container, forks'
// pins), listing, restore in place and fork into a new project's
// container. provisioning.Preparer holds a Manager and hands it the
// lifecycle lock, its LXD error classification and the preview resync.
//
// It imports lxdexec (the snapshot types), api and errdefs only, and must
// never import provisioning (which imports it), providers, the daemon or
// config.
package checkpoint
