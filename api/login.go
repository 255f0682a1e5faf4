package api

import "time"

// StartLoginRequest is POST /v1/providers/{id}/login's body: method ""
// is the provider's default ("device-code" for Codex, "oauth" for Claude
// Code); "api-key" is refused for Codex (S13).
type StartLoginRequest struct {
	Method string `json:"method,omitempty"`
}

// LoginCodeRequest is POST /v1/providers/{id}/login/{login}/code's body:
// the code the provider's sign-in page showed (Claude Code).
type LoginCodeRequest struct {
	Code string `json:"code"`
}

// ProviderLogin is a host CLI login the daemon runs as the host user. It
// never carries a token: the sign-in URL, the one-time user code to enter
// there (Codex), whether the CLI waits for a pasted code (Claude Code) and
// a message.
type ProviderLogin struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	// State: starting, waiting, succeeded, failed, cancelled.
	State     string    `json:"state"`
	Method    string    `json:"method"`
	URL       string    `json:"url,omitempty"`
	UserCode  string    `json:"userCode,omitempty"`
	NeedsCode bool      `json:"needsCode,omitempty"`
	Message   string    `json:"message,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// LogoutResponse is POST /v1/providers/{id}/logout's answer: the CLI's
// own last line.
type LogoutResponse struct {
	Provider string `json:"provider"`
	Message  string `json:"message"`
}
