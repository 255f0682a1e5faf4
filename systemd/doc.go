// Package systemd owns remoted's integration with systemd: readiness,
// status, reload, stopping and watchdog notification over $NOTIFY_SOCKET
// (Notifier), the socket-activated API listener (ActivatedListener), the
// journald check for log formatting (UnderJournal) and the journald
// priorities of log lines (JournalWriter), and the files shipped
// beside it: remoted.service, remoted.socket, remote.sysusers and
// remote.tmpfiles, installed by `make install`.
//
// It imports only the standard library, golang.org/x/sys/unix and hclog;
// nothing of this module. Every function is a no-op or returns "not
// activated" when the daemon does not run under systemd.
package systemd
