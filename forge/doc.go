// Package forge opens pull requests through a forge's documented REST API:
// GitHub (POST /repos/{owner}/{repo}/pulls), GitLab merge requests (POST
// /projects/{id}/merge_requests) and Gitea/Forgejo (POST
// /repos/{owner}/{repo}/pulls). It owns the three request dialects, the
// decoding of their answers and errors (bounded, the user's token redacted),
// the rule that the token is sent only to the configured API's own host
// (redirects elsewhere are not followed), and ForRepo: picking the
// operator-configured forge ([forges."<host>"]) for a clone URL, so a user's
// URL selects a forge but never names where the token goes.
//
// It also speaks the forges' webhooks (webhook.go: each one's signature
// or token scheme, the issue and comment payloads) and the requests that
// answer them (issues.go: an issue comment, a user's write access).
//
// It imports only config and the standard library: never the daemon, the
// provisioning layers, git or LXD (the caller pushes the branch and hands
// over the token). Its error classes are errdefs marker methods
// (FailedPrecondition, Unavailable, InvalidArgument) for that reason.
package forge
