// Package client is a small typed Go client of remoted's API on its Unix
// socket (docs/api.md), in the manner of tailscale's client/local: one
// method per route, wire types from package api, and every error answer
// decoded into a *Error carrying the envelope's code and message.
//
// It imports only package api and the standard library — never daemon
// code — so remotectl, remote-web and tests can use it freely.
package client
