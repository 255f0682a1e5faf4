// Package providers owns the agent contracts that every CLI adapter and the
// daemon agree on: Provider, RunRequest, Event and its native envelope, the
// error classes, LineParser, and the process and project ports an adapter is
// handed. It imports nothing of daemon, store or transport; its subpackages
// hold the shared runner, one adapter per CLI and the codex app-server harness.
package providers

import (
	"context"
	"encoding/json"
	"errors"
	"remote/internal/errdefs"
)

// ProviderID names one agent CLI integration.
type ProviderID string

// The built-in providers.
const (
	Claude      ProviderID = "claude"
	Codex       ProviderID = "codex"
	MiniMax     ProviderID = "minimax"
	Kimi        ProviderID = "kimi"
	Antigravity ProviderID = "antigravity"
)

// Provider is one agent CLI. It has exactly these three responsibilities
// (S14); parsing is an implementation detail of each adapter.
type Provider interface {
	ID() ProviderID
	Capabilities(ctx context.Context, req CapabilityRequest) (Capabilities, error)
	// Run executes one turn. It emits normalized events as they happen and
	// returns nil on success or cancellation, an error wrapping ErrRunFailed
	// when it already emitted run.failed, ErrSessionNotFound when a resume
	// or fork named an unknown session, or another error.
	Run(ctx context.Context, req RunRequest, emit func(Event)) error
}

// CapabilityRequest scopes a capability query (a project may narrow models).
type CapabilityRequest struct {
	ProjectID string
	// Cached asks for an answer from what the adapter already knows: a
	// model catalogue still being fetched (Codex's model/list) is not
	// waited for; the cached one, or the fallback, is declared. A
	// prompt's admission asks so (it never waits for a catalogue).
	Cached bool
}

// SkillsStrategy says how selected skills reach the prompt (S7).
type SkillsStrategy string

// The skill strategies of S7.
const (
	SkillsSlashCommand  SkillsStrategy = "slash-command"
	SkillsDollarMention SkillsStrategy = "dollar-mention"
	SkillsInstructions  SkillsStrategy = "instructions"
	SkillsNone          SkillsStrategy = "none"
)

// Capabilities describes what a provider supports; the daemon never assumes
// more than is declared here.
type Capabilities struct {
	Label          string         `json:"label"`
	Models         []string       `json:"models,omitempty"`
	DefaultModel   string         `json:"defaultModel,omitempty"`
	Efforts        []string       `json:"efforts,omitempty"`
	Resume         bool           `json:"resume"`
	Fork           bool           `json:"fork"`
	PlanMode       bool           `json:"planMode"`
	Skills         SkillsStrategy `json:"skills"`
	CredentialSync bool           `json:"credentialSync"`
	Browser        bool           `json:"browser"`
	Schedule       bool           `json:"schedule"`
	// Approvals: the provider honours RunPreferences.ApprovalPolicy and
	// asks through interaction.request events (S21).
	Approvals bool `json:"approvals"`
}

// RunMode is the chat's run mode.
type RunMode string

// The run modes.
const (
	ModeDefault RunMode = "default"
	ModePlan    RunMode = "plan"
)

// RunPreferences are optional per-chat tuning knobs a provider may honour.
type RunPreferences struct {
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	ServiceTier     string `json:"serviceTier,omitempty"`
	ApprovalPolicy  string `json:"approvalPolicy,omitempty"`
	SandboxPolicy   string `json:"sandboxPolicy,omitempty"`
}

// RunRequest is the only input a provider receives for a turn.
type RunRequest struct {
	Provider       ProviderID
	ConversationID string // the chat id
	RunID          string
	Prompt         string // final prompt: history and skills already applied
	Cwd            string // host working directory of a loose chat
	Model          string
	Mode           RunMode
	ResumeID       string // native session to resume; empty starts fresh
	Fork           bool   // fork ResumeID instead of continuing it
	// ProjectID selects the execution target: empty runs on the host, set
	// runs inside that project's container through the ProjectPreparer.
	ProjectID           string
	ProjectUID          string // the project id the chat is bound to (api.Chat.ProjectID)
	Preferences         RunPreferences
	RuntimeEnv          map[string]string // backend-issued variables (S11)
	EnableBrowser       bool
	EnableScheduleTools bool
	Skills              []string // selected skill names, already validated
	// InteractionResponses carries the client's explicit answers to
	// interaction.request events of this run (S21). May be nil.
	InteractionResponses <-chan InteractionResponse
}

// InteractionResponse answers one pending interaction. ID is the JSON text
// of the upstream request id, so "\"req-1\"" and 1 stay distinct.
type InteractionResponse struct {
	ID     string          `json:"id"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// LineParser turns one line of a line-oriented CLI's stdout into events.
// A returned error means the line is skipped (and logged) by RunProcess.
type LineParser interface {
	ParseLine(line []byte) ([]Event, error)
}

// ErrRunFailed is returned (wrapped) by a provider that already emitted
// run.failed, so the daemon does not persist a second generic error (S16).
var ErrRunFailed = errors.New("provider run failed")

// ErrUnfinishedTurn is returned (wrapped, with details after it) by a
// provider whose CLI exited successfully without a terminal event
// (run.completed, run.failed or run.interrupted): the turn never finished,
// so the daemon persists "<provider> exited without finishing the turn".
var ErrUnfinishedTurn = errors.New("exited without finishing the turn")

// ErrNotWired means a run needs a port the adapter was built without: a
// host launcher for a host run, or a Preparer and Containers for a project
// run. It is a failed precondition (errdefs); every adapter answers it.
var ErrNotWired = errdefs.New(errdefs.ErrFailedPrecondition, "launcher not configured")

// ErrSessionNotFound means the native session named by ResumeID does not
// exist; the daemon clears it and retries once from visible history (S28).
var ErrSessionNotFound = errors.New("provider session not found")

// ErrCredentialSyncRejected means credentials copied back from a project
// container were refused before they replaced anything on the host: not
// the provider's expected shape (or an API-key record, S13), or a host
// path that is not safe to write for the host user. Adapters report it to
// the chat as system/credential_sync_rejected with the reason, never the
// content.
var ErrCredentialSyncRejected = errors.New("credential sync rejected")
