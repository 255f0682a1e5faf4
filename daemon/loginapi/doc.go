// Package loginapi serves the host CLIs' logins: a daemon.RouteProvider
// whose routes start, read, answer and cancel a provider CLI's login and
// run its logout, as the host user, for the host user or an administrator
// acting as itself only (the CLI's account is every loose chat's).
//
// It joins the route table through daemon.Options.RouteProviders and uses
// the daemon's helpers (DecodeBody, WriteJSON, UserFrom, IsAdmin, Error);
// it reaches a CLI only through the providers' LoginDriver. It must never
// import the other route providers (projectapi, repoapi, doctor), a
// provider adapter or config.
package loginapi
