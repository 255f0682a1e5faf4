package providers

import (
	"context"
	"errors"
	"time"
)

// Login states, as LoginStatus.State reports them.
const (
	LoginStarting  = "starting"  // the CLI runs, nothing to show yet
	LoginWaiting   = "waiting"   // URL (and code) shown: the user signs in
	LoginSucceeded = "succeeded" // the CLI stored its credentials
	LoginFailed    = "failed"    // the CLI gave up; Message says why
	LoginCancelled = "cancelled" // cancelled, or timed out
)

// Login methods a start request may ask for.
const (
	LoginMethodDeviceCode = "device-code" // Codex: `codex login --device-auth`
	LoginMethodOAuth      = "oauth"       // Claude Code: `claude auth login`, code pasted back
	LoginMethodAPIKey     = "api-key"
)

// ErrLoginMethod means a provider does not offer the requested login
// method; its message says which it offers and why.
var ErrLoginMethod = errors.New("login method not offered")

// LoginStatus is what a running or finished login shows the user. It
// never carries a token: only the sign-in URL, the one-time user code
// (which the user types into the provider's page) and a message.
type LoginStatus struct {
	State string `json:"state"`
	// Method is how the CLI logs in (LoginMethod*).
	Method string `json:"method"`
	URL    string `json:"url,omitempty"`
	// UserCode is the device code to enter at URL (Codex).
	UserCode string `json:"userCode,omitempty"`
	// NeedsCode says the CLI waits for the code the provider's page shows
	// after sign-in (Claude Code): submit it with SubmitCode.
	NeedsCode bool      `json:"needsCode,omitempty"`
	Message   string    `json:"message,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// Done reports whether the login has ended.
func (s LoginStatus) Done() bool {
	return s.State == LoginSucceeded || s.State == LoginFailed || s.State == LoginCancelled
}

// LoginSession is one running CLI login.
type LoginSession interface {
	Status() LoginStatus
	// SubmitCode hands the code the user copied from the provider's page
	// to the CLI (only when Status().NeedsCode).
	SubmitCode(code string) error
	// Cancel stops the CLI; the state becomes LoginCancelled.
	Cancel()
	// Done is closed when the login has ended.
	Done() <-chan struct{}
}

// LoginDriver is implemented by providers whose host CLI can be logged in
// and out by the daemon, running the CLI's own login as the host user.
type LoginDriver interface {
	// StartLogin starts the CLI's login with method ("" : the default).
	// The session outlives ctx; it ends on its own after at most
	// LoginTimeout.
	StartLogin(ctx context.Context, method string) (LoginSession, error)
	// Logout runs the CLI's own logout and returns its one-line result.
	Logout(ctx context.Context) (string, error)
}

// LoginTimeout bounds a login session (the device code's own lifetime
// is 15 minutes).
const LoginTimeout = 15 * time.Minute
