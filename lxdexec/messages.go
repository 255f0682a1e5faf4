package lxdexec

import (
	"errors"
	"strings"
)

// Msg names one of LXD's messages this client acts on. LXD gives these
// conditions no code of their own (a 400, or a 202 whose operation fails
// with text), so their text is the only signal. Every match of LXD's
// text in the repository goes through this one table; testdata/messages
// holds, per LXD version, the full messages that version answers, and
// TestMessagesOfThisLXD provokes them from the LXD on the machine.
type Msg int

// The messages, each with the part of LXD's text that identifies it.
const (
	// MsgBusy: another operation holds the instance (`Instance is busy
	// running a "stop" operation`).
	MsgBusy Msg = iota + 1
	// MsgFrozen: an exec while a snapshot freezes the instance.
	MsgFrozen
	// MsgNotRunning: an exec (or a file access) on a stopped instance.
	MsgNotRunning
	// MsgOperationEnded: a stream connected to an operation that had
	// already ended.
	MsgOperationEnded
	// MsgStreamsTimedOut: an exec whose streams did not all connect within
	// LXD's 5 s.
	MsgStreamsTimedOut
	// MsgExists: a create of a name in use (LXD 5.0 says it only in the
	// failed operation).
	MsgExists
	// MsgImageExists: an image upload of a fingerprint LXD holds.
	MsgImageExists
	// MsgAlreadyRunning: a start of a running instance.
	MsgAlreadyRunning
	// MsgAlreadyStopped: a stop of a stopped instance.
	MsgAlreadyStopped
	// MsgTimedOut: a state change whose operation timed out (LXD 5.0's
	// forced stop "operation timed out after 30s").
	MsgTimedOut
	// MsgIdmapExhausted: no free isolated uid/gid range for a new
	// container (root's subuid/subgid too small).
	MsgIdmapExhausted
)

// messages is the table: the identifying part of each message, matched
// case-insensitively (LXD has changed capitalisation between versions,
// never these words).
var messages = map[Msg]string{
	MsgBusy:            "is busy running a",
	MsgFrozen:          "instance is frozen",
	MsgNotRunning:      "instance is not running",
	MsgOperationEnded:  "only running operations can be connected",
	MsgStreamsTimedOut: "timed out waiting for websockets to connect",
	MsgExists:          "already exists",
	MsgImageExists:     "same fingerprint already exists",
	MsgAlreadyRunning:  "already running",
	MsgAlreadyStopped:  "already stopped",
	MsgTimedOut:        "timed out",
	MsgIdmapExhausted:  "not enough uid/gid available",
}

// In reports whether LXD's text is message m.
func (m Msg) In(text string) bool {
	part, ok := messages[m]
	return ok && strings.Contains(strings.ToLower(text), part)
}

// HasMessage reports whether err carries LXD's message m: in the
// message of the *Error it wraps, or, for an error that wraps none (a
// stream's), in its text.
func HasMessage(err error, m Msg) bool {
	if err == nil {
		return false
	}
	var lerr *Error
	if errors.As(err, &lerr) {
		return m.In(lerr.Message)
	}
	return m.In(err.Error())
}

// msgNames spells each Msg as in the source (testdata/messages).
var msgNames = map[Msg]string{
	MsgBusy: "MsgBusy", MsgFrozen: "MsgFrozen", MsgNotRunning: "MsgNotRunning",
	MsgOperationEnded: "MsgOperationEnded", MsgStreamsTimedOut: "MsgStreamsTimedOut",
	MsgExists: "MsgExists", MsgImageExists: "MsgImageExists", MsgAlreadyRunning: "MsgAlreadyRunning",
	MsgAlreadyStopped: "MsgAlreadyStopped", MsgTimedOut: "MsgTimedOut", MsgIdmapExhausted: "MsgIdmapExhausted",
}

// String is the Msg's name, e.g. "MsgBusy".
func (m Msg) String() string {
	if s, ok := msgNames[m]; ok {
		return s
	}
	return "Msg(?)"
}

// Messages lists every Msg of the table.
func Messages() []Msg {
	out := make([]Msg, 0, len(messages))
	for m := MsgBusy; m <= MsgIdmapExhausted; m++ {
		out = append(out, m)
	}
	return out
}
