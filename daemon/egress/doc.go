// Package egress is the daemon's egress proxy for project containers
// whose network is "off" or "allowlist": an HTTP proxy (absolute-form
// requests and CONNECT) listening on one Unix socket per project, which
// an LXD proxy device (bind=instance) makes the container's
// 127.0.0.1:Port. The socket tells which project a connection is from.
//
// Every request is decided by host name and port against the project's
// policy, read afresh per connection (Policy): the daemon's own needs
// (the model providers' API hosts), the operator's allow list
// ([projects.network] allow) and, in allowlist mode, the project's own
// allow list. A bare IP address is refused unless the operator's list
// names it; a name is resolved here and the connection dials the address
// that was checked (no DNS rebinding), which must be public unless the
// operator's list named the host. A refusal answers 403 at once and is
// reported (Options.Blocked: a system/egress_blocked event).
//
// A project environment's setup and maintenance get more than the agent
// (api.EnvironmentNetwork): Grant mints a random credential for one exec,
// which the exec's proxy URL carries (http://setup:TOKEN@127.0.0.1:Port,
// so Proxy-Authorization: Basic); a request through the project's socket
// carrying a live one is decided in allowlist mode with the grant's
// hosts added. The credential dies with the exec (revoke); a request
// carrying one that is not live is refused (407) whatever it asks.
//
// It imports api and the standard library only; it must never import
// the daemon, provisioning, lxdexec or config (cmd/remoted wires it).
package egress
