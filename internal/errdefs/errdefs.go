// Package errdefs is remote's one error taxonomy (containerd's errdefs
// shape): a small set of classes that domain packages wrap their errors in,
// with Is… helpers that test for a class anywhere in an error's chain.
//
// Domain packages (the store, provisioning, the prompt service, the
// provider registry, host-user resolution) classify their errors here and
// never choose HTTP statuses; the daemon's HTTP layer maps classes to
// statuses and envelope codes in one place (daemon.ToHTTP), and the client
// maps envelope codes back to classes (client.Error unwraps to its class),
// so errdefs.IsNotFound works on both sides of the socket.
//
// Packages that must import nothing of remote's (lxdexec) take part through
// marker methods: an error in the chain with a method NotFound() bool,
// Conflict() bool, Unavailable() bool, … that returns true belongs to that
// class.
//
// It imports only the standard library and must never import another
// package of this module.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes. Test with the Is… helpers (which also honour marker
// methods); errors.Is works for errors wrapped here.
var (
	// ErrNotFound: the thing named does not exist (or is not the caller's).
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: the thing to create exists already. A conflict.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: the request conflicts with the current state.
	ErrConflict = errors.New("conflict")
	// ErrInvalidArgument: the input is wrong; the message names what.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrFailedPrecondition: the system is not in a state the operation
	// needs (e.g. a feature not configured on this daemon).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnavailable: a dependency (LXD, a provider, the daemon itself while
	// it stops) cannot serve now; retrying later may work.
	ErrUnavailable = errors.New("unavailable")
	// ErrPermissionDenied: the caller is known but may not do this.
	ErrPermissionDenied = errors.New("permission denied")
	// ErrUnauthenticated: the caller did not say (validly) who it is.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrResourceExhausted: a quota or the disk is full.
	ErrResourceExhausted = errors.New("resource exhausted")
)

// classed is an error in a class: its text is err's alone.
type classed struct {
	class error
	err   error
}

func (e *classed) Error() string   { return e.err.Error() }
func (e *classed) Unwrap() []error { return []error{e.err, e.class} }

// Wrap puts err in class, keeping err's text and chain. A nil err stays nil.
func Wrap(class, err error) error {
	if err == nil {
		return nil
	}
	return &classed{class: class, err: err}
}

// New returns a new sentinel error with text msg in class; errors.Is finds
// both the sentinel and its class.
func New(class error, msg string) error { return Wrap(class, errors.New(msg)) }

// NotFound returns an ErrNotFound error formatted like fmt.Errorf (%w works).
func NotFound(format string, args ...any) error {
	return Wrap(ErrNotFound, fmt.Errorf(format, args...))
}

// Conflict returns an ErrConflict error formatted like fmt.Errorf.
func Conflict(format string, args ...any) error {
	return Wrap(ErrConflict, fmt.Errorf(format, args...))
}

// InvalidArgument returns an ErrInvalidArgument error formatted like
// fmt.Errorf; the message should name the offending field or value.
func InvalidArgument(format string, args ...any) error {
	return Wrap(ErrInvalidArgument, fmt.Errorf(format, args...))
}

// FailedPrecondition returns an ErrFailedPrecondition error formatted like
// fmt.Errorf.
func FailedPrecondition(format string, args ...any) error {
	return Wrap(ErrFailedPrecondition, fmt.Errorf(format, args...))
}

// Unavailable returns an ErrUnavailable error formatted like fmt.Errorf.
func Unavailable(format string, args ...any) error {
	return Wrap(ErrUnavailable, fmt.Errorf(format, args...))
}

// PermissionDenied returns an ErrPermissionDenied error formatted like
// fmt.Errorf.
func PermissionDenied(format string, args ...any) error {
	return Wrap(ErrPermissionDenied, fmt.Errorf(format, args...))
}

// Unauthenticated returns an ErrUnauthenticated error formatted like
// fmt.Errorf.
func Unauthenticated(format string, args ...any) error {
	return Wrap(ErrUnauthenticated, fmt.Errorf(format, args...))
}

// ResourceExhausted returns an ErrResourceExhausted error formatted like
// fmt.Errorf.
func ResourceExhausted(format string, args ...any) error {
	return Wrap(ErrResourceExhausted, fmt.Errorf(format, args...))
}

// IsNotFound reports whether err is in class ErrNotFound (or has a
// NotFound() bool method returning true in its chain).
func IsNotFound(err error) bool {
	return is(err, ErrNotFound, func(e error) bool {
		m, ok := e.(interface{ NotFound() bool })
		return ok && m.NotFound()
	})
}

// IsAlreadyExists reports whether err is in class ErrAlreadyExists (or
// marks itself AlreadyExists()).
func IsAlreadyExists(err error) bool {
	return is(err, ErrAlreadyExists, func(e error) bool {
		m, ok := e.(interface{ AlreadyExists() bool })
		return ok && m.AlreadyExists()
	})
}

// IsConflict reports whether err is a conflict: class ErrConflict or
// ErrAlreadyExists (or marked Conflict() / AlreadyExists()).
func IsConflict(err error) bool {
	return IsAlreadyExists(err) || is(err, ErrConflict, func(e error) bool {
		m, ok := e.(interface{ Conflict() bool })
		return ok && m.Conflict()
	})
}

// IsInvalidArgument reports whether err is in class ErrInvalidArgument (or
// marks itself InvalidArgument()).
func IsInvalidArgument(err error) bool {
	return is(err, ErrInvalidArgument, func(e error) bool {
		m, ok := e.(interface{ InvalidArgument() bool })
		return ok && m.InvalidArgument()
	})
}

// IsFailedPrecondition reports whether err is in class
// ErrFailedPrecondition (or marks itself FailedPrecondition()).
func IsFailedPrecondition(err error) bool {
	return is(err, ErrFailedPrecondition, func(e error) bool {
		m, ok := e.(interface{ FailedPrecondition() bool })
		return ok && m.FailedPrecondition()
	})
}

// IsUnavailable reports whether err is in class ErrUnavailable (or marks
// itself Unavailable()).
func IsUnavailable(err error) bool {
	return is(err, ErrUnavailable, func(e error) bool {
		m, ok := e.(interface{ Unavailable() bool })
		return ok && m.Unavailable()
	})
}

// IsPermissionDenied reports whether err is in class ErrPermissionDenied
// (or marks itself PermissionDenied()).
func IsPermissionDenied(err error) bool {
	return is(err, ErrPermissionDenied, func(e error) bool {
		m, ok := e.(interface{ PermissionDenied() bool })
		return ok && m.PermissionDenied()
	})
}

// IsUnauthenticated reports whether err is in class ErrUnauthenticated (or
// marks itself Unauthenticated()).
func IsUnauthenticated(err error) bool {
	return is(err, ErrUnauthenticated, func(e error) bool {
		m, ok := e.(interface{ Unauthenticated() bool })
		return ok && m.Unauthenticated()
	})
}

// IsResourceExhausted reports whether err is in class ErrResourceExhausted
// (or marks itself ResourceExhausted()).
func IsResourceExhausted(err error) bool {
	return is(err, ErrResourceExhausted, func(e error) bool {
		m, ok := e.(interface{ ResourceExhausted() bool })
		return ok && m.ResourceExhausted()
	})
}

// is reports whether class is in err's chain or an error of the chain
// passes marked.
func is(err, class error, marked func(error) bool) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, class) {
		return true
	}
	return walk(err, marked)
}

// walk visits err and everything it wraps, depth first, until f is true.
func walk(err error, f func(error) bool) bool {
	for err != nil {
		if f(err) {
			return true
		}
		switch u := err.(type) { //nolint:errorlint // this is the unwrap walk itself, one level at a time
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, f) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return false
		}
	}
	return false
}
