package errdefs

import (
	"errors"
	"fmt"
	"testing"
)

type marker struct{}

func (marker) Error() string     { return "lxd: unreachable" }
func (marker) Unavailable() bool { return true }
func (marker) NotFound() bool    { return false }

func TestClasses(t *testing.T) {
	sentinel := New(ErrConflict, "container belongs to another project")
	tests := []struct {
		name string
		err  error
		is   func(error) bool
		text string
	}{
		{"constructor keeps the text", InvalidArgument("skills[%d]: unknown skill %q", 1, "x"), IsInvalidArgument, `skills[1]: unknown skill "x"`},
		{"wrapped sentinel", fmt.Errorf("adopt %q: %w", "c1", sentinel), IsConflict, `adopt "c1": container belongs to another project`},
		{"already exists is a conflict", fmt.Errorf("create: %w", ErrAlreadyExists), IsConflict, "create: already exists"},
		{"marker method", fmt.Errorf("prepare: %w", marker{}), IsUnavailable, "prepare: lxd: unreachable"},
		{"marker in a join", errors.Join(errors.New("a"), fmt.Errorf("b: %w", marker{})), IsUnavailable, "a\nb: lxd: unreachable"},
		{"two classes", Wrap(ErrUnavailable, ResourceExhausted("full")), IsResourceExhausted, "full"},
		{"two classes (2)", Wrap(ErrUnavailable, ResourceExhausted("full")), IsUnavailable, "full"},
		{"not found", NotFound("chat %s", "a1"), IsNotFound, "chat a1"},
		{"failed precondition", FailedPrecondition("not wired"), IsFailedPrecondition, "not wired"},
		{"permission denied", PermissionDenied("no"), IsPermissionDenied, "no"},
		{"unauthenticated", Unauthenticated("who"), IsUnauthenticated, "who"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.is(tt.err) {
				t.Errorf("%v: not in its class", tt.err)
			}
			if tt.err.Error() != tt.text {
				t.Errorf("text %q, want %q", tt.err.Error(), tt.text)
			}
		})
	}
	if !errors.Is(fmt.Errorf("x: %w", sentinel), sentinel) {
		t.Error("errors.Is lost the sentinel")
	}
	for _, f := range []func(error) bool{IsNotFound, IsConflict, IsInvalidArgument, IsUnavailable, IsResourceExhausted, IsPermissionDenied, IsUnauthenticated, IsFailedPrecondition} {
		if f(nil) || f(errors.New("plain")) {
			t.Error("an unclassified error is in a class")
		}
	}
	if IsNotFound(marker{}) {
		t.Error("a marker returning false counts")
	}
	if Wrap(ErrNotFound, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
}
