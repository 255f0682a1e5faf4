// Package threatmodel holds no code: its test keeps docs/threat-model.md
// in step with what ships. Every route of the daemon's route table (built
// the way cmd/remoted wires it, route providers included, by
// daemon/daemontest) and of remote-web's two origins (web's RouteTable
// and PreviewRouteTable) must have a row there, no row may name a route
// that is gone, and every test a row cites must exist — so a new surface
// cannot ship without its attacker, defence and test written down.
//
// It imports nothing; its test imports daemon/daemontest and web.
package threatmodel
