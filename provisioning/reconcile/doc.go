// Package reconcile keeps stored project status true to LXD: its
// Reconciler starts every autostart project at daemon start (bounded
// parallelism), corrects the stored status of the others, then follows
// LXD lifecycle events and resyncs periodically, retrying with backoff
// while LXD is unreachable. A delete that is part of a move between
// cluster members is not recorded as missing.
//
// It starts containers through the Start function provisioning hands it
// (the preparer's Start) and reads LXD through the small InstanceLister
// and EventSource interfaces. It imports lxdexec, lxdconn, placement and
// api only, and must never import provisioning (which imports it),
// providers, the daemon or config.
package reconcile
