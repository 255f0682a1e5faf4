// Package systemd owns remoted's integration with systemd: readiness, status
// and watchdog notification, socket activation, and the unit files shipped
// beside it. It imports only the standard library and go-systemd.
package systemd
