// Package socket owns the API's Unix socket on disk: Listen creates its
// directory, replaces a stale socket file only when nothing answers on it
// (ErrInUse otherwise) and gives the socket mode 0660 and its group.
// Package daemon serves on the listener; cmd/remoted and the test
// harnesses open it.
//
// It imports the standard library only and must never import anything of
// this module.
package socket
