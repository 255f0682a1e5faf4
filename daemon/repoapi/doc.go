// Package repoapi serves a project chat's repository routes (docs/operating.md,
// "A repository per project"): GET /v1/chats/{id}/diff (a turn's changes, or the
// working tree against the cloned base), POST /v1/chats/{id}/push (commit what
// is uncommitted on the chat's branch and push it with the project's token) and
// POST /v1/chats/{id}/pull-request (push, then open a pull request of the branch
// on the repository's forge). It finds the chat through the chats, run hub
// and prompt service it is handed at construction (Options.Chats, Hub,
// Prompts; owner checked: another user's chat is not found), the project and its token
// secret through the store, and runs git in the container through
// provisioning/gitrepo. A chat with its own branch (and worktree) is diffed and
// pushed there; Checkout tells the preparer where a chat works and whether
// another chat of its project runs.
//
// The diff never starts a container (a GET: a link in agent-written
// Markdown could), and diffs are bounded together as well as one by one
// (security review finding 5): each in progress holds its worst-case
// memory of a daemon-wide budget and one of its user's places (budget.go),
// and is refused at once, naming the bound, when it does not fit.
//
// It also takes a project's forge webhooks (hooks.go, POST
// /v1/projects/{name}/forge-events, relayed by remote-web): each
// delivery verified with the project's webhook secret through HookForge,
// replays and other repositories' deliveries refused, and a trigger from
// a user with write access made a chat on the daemon's remote/issue-<n>
// branch whose turn ends are answered on the issue (push, draft pull
// request, comment).
//
// It imports daemon (routes, errors, identity), the store's types,
// provisioning and provisioning/gitrepo; it must never import projectapi
// or config, nor package forge (which depends on config): cmd/remoted
// converts config into Options and adapts forge to Opener.
package repoapi
