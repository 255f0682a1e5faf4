// Package web owns remote-web: browser authentication, the reverse proxy from
// browsers to the daemon's Unix socket, and the embedded chat page. It imports
// config and api, never daemon.
package web
