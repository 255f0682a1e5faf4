// Package deps holds no code: its test (deps_test.go, in the manner of
// Tailscale's deps tests) lists the import rules of this repository —
// which package may never depend on which — and fails `go test ./...`
// (hence `make test`) when a change breaks one. The rules are written as
// import-path prefixes, so a rule about remote/daemon also covers every
// package under daemon/ (daemon/store and whatever the daemon is split
// into), and a package that does not exist yet is covered as soon as it
// appears.
//
// It imports nothing; its test runs `go list -deps` on the module.
package deps
