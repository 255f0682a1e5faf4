// Package projection owns the projection of a normalized agent event
// (providers.Event) onto the chat event the API stores and sends (the
// table in docs/api.md, S17), usage renamed to its wire names. It is pure:
// no I/O, no clock of its own.
//
// It imports api and providers only, and must never import the prompt
// service, the store, the run hub, the HTTP layer or an adapter.
package projection
