// Package gitrepo owns a project's git repository inside its container
// (docs/operating.md, "A repository per project"): validating the repository
// URL, the clone into /workspace, the working tree recorded as a git tree at a
// turn's start (through a temporary index: the user's index and files are
// untouched), diffs between trees with git's output parsed, a chat's own branch
// (checked against git's ref rules) checked out in /workspace or in a git
// worktree of its own under /workspace/.worktrees, and the commit and push of a
// chat's branch.
//
// Everything runs through LXD's exec API as git in the container. The
// token reaches git only through a credential helper configured in the
// exec's environment (GIT_CONFIG_COUNT), reading it from the exec's
// environment and releasing it only to the repository's own scheme and
// host: it is never in argv, .git/config, a remote URL, a file, an event
// or an error (git's messages are sanitized).
//
// It imports lxdexec, errdefs, the API wire types and the providers'
// contracts (a secret); it must never import provisioning (which imports
// it), the daemon, the runner, a provider adapter or config.
package gitrepo
