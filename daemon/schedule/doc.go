// Package schedule runs the chats' schedules: a prompt sent to a chat on
// a cron expression in a time zone (robfig/cron's parser and
// Schedule.Next only; the firing loop is ours, so restarts are ours to
// decide), as the chat's owner, through the prompt service's own paths
// (Start, or Enqueue for overlap "queue"). The last firing time is stored
// before the prompt is submitted, so a schedule never fires twice for one
// boundary, and a boundary missed while the daemon was down fires once at
// start (or is recorded as missed without catch-up). It also makes and
// checks routine tokens: a random token shown once, stored as its SHA-256,
// compared in constant time, that can fire its own schedule and nothing
// else.
//
// It imports the store, api, errdefs and the prompt service's types; it
// must not import net/http or package daemon (daemon/scheduleapi serves
// its routes).
package schedule
