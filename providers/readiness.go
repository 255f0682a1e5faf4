package providers

import (
	"context"
	"time"
)

// The CLI versions the contract tests ran (scripts/install-clis installs
// exactly these; TestTestedVersionsMatchInstallScript keeps the two equal).
// A different version still runs; readiness reports it as untested.
const (
	TestedClaudeVersion = "2.1.328"
	TestedCodexVersion  = "0.169.0"
)

// The ways a CLI can be logged in, as Readiness.Auth reports them.
const (
	AuthSubscription = "subscription" // a ChatGPT / Claude account login
	AuthAPIKey       = "api-key"      // an API key (refused for Codex, S13)
	AuthNone         = "none"         // not logged in
	AuthUnknown      = "unknown"      // the CLI could not say
	// AuthModelProvider: Codex configured with a custom model provider
	// ([model_providers.<id>] with its own endpoint and env_key), which
	// needs no login.
	AuthModelProvider = "model-provider"
)

// Readiness says whether a provider's CLI can take a prompt on this host
// now: the binary, its version, its login. Action is one line telling the
// operator what to do when Ready is false (or a warning when it is true).
type Readiness struct {
	Ready         bool      `json:"ready"`
	BinaryFound   bool      `json:"binaryFound"`
	Binary        string    `json:"binary"` // the resolved path, or the configured name when not found
	Version       string    `json:"version,omitempty"`
	TestedVersion string    `json:"testedVersion,omitempty"`
	Tested        bool      `json:"tested"`
	LoggedIn      bool      `json:"loggedIn"`
	Auth          string    `json:"auth"`
	Action        string    `json:"action,omitempty"`
	CheckedAt     time.Time `json:"checkedAt"`
}

// CredentialChecker is implemented by providers whose every run, on the
// host and in a project's container alike, needs a credential only the
// daemon's config gives (MiniMax's API key). MissingCredential returns the
// one-line action saying what to set, or "" when it is set.
type CredentialChecker interface {
	MissingCredential() string
}

// ReadinessChecker is implemented by providers that can report their
// readiness. Readiness may use cached results; it must not block for long
// (a few seconds at most).
type ReadinessChecker interface {
	Readiness(ctx context.Context) Readiness
}
