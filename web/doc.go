// Package web owns remote-web: browser authentication (users from config,
// bcrypt, server-side sessions, rate-limited login), the reverse proxy from
// browsers to the daemon's Unix socket (only /v1/* and /ws/*, with the
// caller named in X-Remote-User from the session, same-origin checks on
// every WebSocket and state-changing request, and JSON-only bodies), the
// Host allowlist against DNS rebinding, the embedded page, whose agent
// Markdown is sanitized to plain, inert HTML, and the preview origins: one
// per project and port (<port>-<project id>.<domain>), entered with a
// token bound to the login session that minted it, never serving a
// service worker, and never on the page's registrable domain while the
// session cookie is a plain-http one (a preview could toss it). Sessions,
// logins and previews are capped per user. The routine hook (POST
// /hooks/routines/{id}) passes a schedule's routine token, and nothing
// else, to the daemon, which checks it; a routine token anywhere else is
// refused (403).
//
// Its two origins dispatch on route tables (routes.go) that
// docs/threat-model.md must cover, row by row.
//
// It imports api (the wire types), hclog and bcrypt; never daemon, and not
// config either: cmd/remote-web maps the TOML onto Options. The page's
// browser libraries under static/vendor are vendored by `make vendor-web`.
// The page (static/*.js) opens chats by history pages, follows
// /ws/workspace for its sidebar and notifies while hidden; only its tests
// import daemon/store, to seed a long chat into a real store, and
// daemon/daemontest, to fire routines on a real daemon.
package web
