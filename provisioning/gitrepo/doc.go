// Package gitrepo owns a project's git repository inside its container
// (docs/operating.md, "A repository per project"): validating the repository
// URL, the clone into /workspace, the working tree recorded as a git tree at a
// turn's start (through a temporary index: the user's index and files are
// untouched), diffs between trees with git's output parsed, a chat's own branch
// (checked against git's ref rules) checked out in /workspace or in a git
// worktree of its own under /workspace/.worktrees, and the commit and push of a
// chat's branch.
//
// Git runs in two places. In the container, through LXD's exec API:
// the clone from a bundle, the working tree recorded, diffs, branches and
// the commit — with no token, no credential helper and no transport but a
// local bundle. On the daemon's host (Remote): everything that talks to
// the repository's server (ls-remote, fetch, push), with the token given
// through a credential helper answering only the repository's own scheme
// and host. Commits cross between the two as git bundles on an exec's
// stdin and stdout, checked by the host's git; the token is never in the
// container, argv, .git/config, a remote URL, a file, an event or an
// error (git's messages are sanitized).
//
// It imports lxdexec, errdefs, internal/keyed, the API wire types and the providers'
// contracts (a secret); it must never import provisioning (which imports
// it), the daemon, the runner, a provider adapter or config.
package gitrepo
