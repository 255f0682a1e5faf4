// Package api holds the daemon API's wire types: requests, responses, the
// error envelope and chat events. It is shared by daemon, remotectl and web so
// that no client imports server code; it imports only the standard library.
package api
