package api

import (
	"encoding/json"
	"time"
)

// Error codes of the JSON error envelope.
const (
	CodeBadRequest           = "bad_request"
	CodeUnauthorized         = "unauthorized"
	CodeForbidden            = "forbidden"
	CodeNotFound             = "not_found"
	CodeConflict             = "conflict"
	CodePromptAlreadyRunning = "prompt_already_running"
	CodeUnavailable          = "unavailable"
	CodeInternal             = "internal"
	// CodeStorageFull (507) means the daemon's state directory is short of
	// space: below [daemon] min_free, or a write failed with ENOSPC.
	CodeStorageFull = "storage_full"
	// CodeUnsupportedMediaType (415): a JSON body sent without
	// Content-Type: application/json.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeRateLimited (429): too many requests of a kind at once (the
	// message names the bound); Retry-After says when to try again.
	CodeRateLimited = "rate_limited"
)

// ErrorBody is the inside of the error envelope.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorResponse is every error answer: {"error":{"code":..,"message":..}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// Event is one chat event, persisted or transient, in the exact wire shape
// of the original Remote frontend's chat socket (docs/api.md).
type Event struct {
	Seq           int64           `json:"seq,omitempty"`
	T             int64           `json:"t,omitempty"`
	Type          string          `json:"type"`
	TurnID        string          `json:"turnId,omitempty"`
	Text          string          `json:"text,omitempty"`
	MessageID     string          `json:"messageId,omitempty"`
	ID            string          `json:"id,omitempty"`
	Name          string          `json:"name,omitempty"`
	Input         json.RawMessage `json:"input,omitempty"`
	Output        string          `json:"output,omitempty"`
	IsError       bool            `json:"isError,omitempty"`
	ToolName      string          `json:"toolName,omitempty"`
	Subtype       string          `json:"subtype,omitempty"`
	Data          json.RawMessage `json:"data,omitempty"`
	SessionID     string          `json:"sessionId,omitempty"`
	Provider      string          `json:"provider,omitempty"`
	Usage         json.RawMessage `json:"usage,omitempty"`
	Message       string          `json:"message,omitempty"`
	Running       bool            `json:"running,omitempty"`
	Native        json.RawMessage `json:"native,omitempty"`
	InteractionID string          `json:"interactionId,omitempty"`
	Status        string          `json:"status,omitempty"`
	// Synthetic marks a user event whose prompt a client generated itself
	// (the original frontend's Test menu sends "autotest"); stored as sent.
	Synthetic string `json:"synthetic,omitempty"`
	// Snapshot and Project name the LXD snapshot of a checkpoint event.
	Snapshot string `json:"snapshot,omitempty"`
	Project  string `json:"project,omitempty"`
	// LastSeq, on a sync only, is the seq of the last stored event sent
	// to that connection before it: a client that applies stored events
	// later than it reads them (once per animation frame) applies the
	// sync once it has applied that event (docs/api.md).
	LastSeq int64 `json:"lastSeq,omitempty"`
}

// Chat event types (docs/api.md).
const (
	EventUser                = "user"
	EventSession             = "session"
	EventSystem              = "system"
	EventAssistantText       = "assistant_text"
	EventThinking            = "thinking"
	EventToolUseStart        = "tool_use_start"
	EventToolUseEnd          = "tool_use_end"
	EventInteractionRequest  = "interaction_request"
	EventInteractionResolved = "interaction_resolved"
	EventTurnStatus          = "turn_status"
	EventCollaboration       = "collaboration"
	EventProviderEvent       = "provider_event"
	EventUsageUpdate         = "usage_update"
	EventComplete            = "complete"
	EventError               = "error"
	EventSync                = "sync" // transient, never stored
	EventCheckpoint          = "checkpoint"
	// EventQueued stores a prompt queued while a run was active (`id` =
	// its queue id, `text`); EventUnqueued (`id`) its removal by the owner
	// or a queued prompt that could not start (`message` says why).
	EventQueued   = "queued"
	EventUnqueued = "unqueued"
)

// System event subtypes emitted by the daemon itself.
const (
	SubtypeContainerStarting  = "container_starting"
	SubtypeContainerPreparing = "container_preparing"
	SubtypeSessionRecovered   = "session_recovered"
	SubtypeDaemonRestarted    = "daemon_restarted"
	SubtypePromptAccepted     = "prompt_accepted"
	SubtypePromptRejected     = "prompt_rejected"
	SubtypeCheckpointFailed   = "checkpoint_failed"
	SubtypeCheckpointRestored = "checkpoint_restored"
	// SubtypeContainerEvacuated: LXD stopped the project's container to
	// move it off an evacuated cluster member; a run in progress ended
	// and the next prompt resumes the session where LXD put it.
	SubtypeContainerEvacuated = "container_evacuated"
	// SubtypeLimitsClamped: the project's limits were beyond the
	// operator's caps ([projects.limits], lowered since they were set)
	// and were lowered to them before its container started, or when a
	// fork copied them (data: project, limits, clamped).
	SubtypeLimitsClamped = "limits_clamped"
	// Repository events (docs/operating.md, "A repository per project"): the
	// project's repository was cloned into /workspace, or its clone failed
	// (git's message, without the token); the working tree's git tree at a
	// turn's start; a push; a pull request opened on the forge.
	SubtypeRepoCloned      = "repo_cloned"
	SubtypeRepoCloneFailed = "repo_clone_failed"
	// SubtypeEnvironmentSetup is the project environment's setup or
	// maintenance: {phase: "setup"|"maintenance", state: "started"|
	// "output"|"ready"|"failed", line?, exitCode?, cacheKey?, durationMs?,
	// error?}.
	SubtypeEnvironmentSetup = "environment_setup"
	SubtypeTurnTree         = "turn_tree"
	SubtypePushed           = "pushed"
	SubtypePullRequest      = "pull_request"
	// SubtypeEgressBlocked: the project's egress proxy refused a
	// connection (data: host, port, method?, reason).
	SubtypeEgressBlocked = "egress_blocked"
	// SubtypeForgeIssue: the chat was started by a forge issue or comment
	// (a verified webhook); data: forge, number, repo.
	SubtypeForgeIssue = "forge_issue"
)

// Chat is a chat's metadata as the API returns it.
type Chat struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Owner    string `json:"owner,omitempty"`
	Provider string `json:"provider"`
	Project  string `json:"project,omitempty"` // empty: a loose chat on the host
	// ProjectID is the id (Project.ID) of the project the chat was created
	// in. A prompt runs only while the project named Project still has
	// this id and the chat's owner: a project deleted and created again
	// under the same name is another project.
	ProjectID string `json:"projectId,omitempty"`
	// Branch is a project chat's own git branch (created from the clone's base
	// at its first turn); Worktree: it works in its own git worktree of Branch,
	// /workspace/.worktrees/<chat id> (docs/operating.md, "A repository per
	// project").
	Branch   string `json:"branch,omitempty"`
	Worktree bool   `json:"worktree,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
	Model    string `json:"model,omitempty"`
	Mode     string `json:"mode,omitempty"`
	// ApprovalPolicy is the chat's Codex AskForApproval policy (one of
	// ApprovalPolicies); empty lets the provider decide ("never" for
	// Codex and MiniMax). Only providers whose capabilities declare
	// approvals accept it.
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	// ReasoningEffort is one of the provider's declared efforts; empty
	// uses the provider's default.
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	// Sessions is authoritative: provider id -> native session id (S26).
	Sessions map[string]string `json:"sessions,omitempty"`
	// Legacy mirrors of Sessions, kept only for older clients.
	ClaudeSessionID      string    `json:"claudeSessionId,omitempty"`
	CodexSessionID       string    `json:"codexSessionId,omitempty"`
	KimiSessionID        string    `json:"kimiSessionId,omitempty"`
	AntigravitySessionID string    `json:"antigravitySessionId,omitempty"`
	ForkPending          bool      `json:"forkPending,omitempty"`
	SelectedSkills       []string  `json:"selectedSkills,omitempty"`
	CreatedAt            time.Time `json:"createdAt"`
	LastMessageAt        time.Time `json:"lastMessageAt,omitzero"`
	// Running is live state; the store uses it only to find runs that were
	// in flight when the daemon stopped (S5).
	Running bool `json:"running"`
	// Attention is live, never stored: "approval" while the chat's run
	// waits for an answer to an interaction request; empty otherwise.
	Attention string `json:"attention,omitempty"`
	// Queued counts the prompts queued while a run was active; their text
	// is stored apart and listed only by GET /v1/chats/{id}/queue, so a
	// chat (and the chat list) stays small however much is queued.
	Queued int `json:"queued,omitempty"`
}

// QueuedPrompt is one prompt waiting for the chat's current run to end.
type QueuedPrompt struct {
	ID        string    `json:"id"`
	Text      string    `json:"text"`
	Mode      string    `json:"mode,omitempty"`
	Skills    []string  `json:"skills,omitempty"`
	Synthetic string    `json:"synthetic,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Workspace socket message types (GET /ws/workspace).
const (
	WorkspaceSnapshot = "workspace.snapshot"
	ChatUpsert        = "chat.upsert"
	ChatDelete        = "chat.delete"
	ProjectUpsert     = "project.upsert"
	ProjectDelete     = "project.delete"
)

// WorkspaceSnapshotMessage is the workspace socket's first message: the
// caller's chats and projects.
type WorkspaceSnapshotMessage struct {
	Type     string    `json:"type"` // workspace.snapshot
	Chats    []Chat    `json:"chats"`
	Projects []Project `json:"projects"`
}

// WorkspaceMessage is one change on the workspace socket.
type WorkspaceMessage struct {
	Type    string   `json:"type"`
	Chat    *Chat    `json:"chat,omitempty"`    // chat.upsert
	Project *Project `json:"project,omitempty"` // project.upsert
	ID      string   `json:"id,omitempty"`      // chat.delete, project.delete
}

// CreateChatRequest is the body of POST /v1/chats.
type CreateChatRequest struct {
	Provider string `json:"provider"`
	Project  string `json:"project,omitempty"`
	Cwd      string `json:"cwd,omitempty"`
	Model    string `json:"model,omitempty"`
	Title    string `json:"title,omitempty"`
	// ApprovalPolicy is optional: one of ApprovalPolicies, accepted only
	// for a provider whose capabilities declare approvals.
	ApprovalPolicy string `json:"approvalPolicy,omitempty"`
	// ReasoningEffort is optional: one of the provider's declared efforts.
	ReasoningEffort string `json:"reasoningEffort,omitempty"`
	// Branch (a git branch name) and Worktree are optional, for a chat
	// in a project with a repository: Chat.Branch, Chat.Worktree.
	Branch   string `json:"branch,omitempty"`
	Worktree bool   `json:"worktree,omitempty"`
}

// The approval policies a chat may ask for: Codex's AskForApproval
// spellings. "untrusted" and "on-request" make the agent ask before it runs
// a command, which the page shows as an interaction card (S21).
const (
	ApprovalUntrusted = "untrusted"
	ApprovalOnFailure = "on-failure"
	ApprovalOnRequest = "on-request"
	ApprovalNever     = "never"
)

// ApprovalPolicies lists every valid approval policy, in the order the
// page and remotectl show them.
func ApprovalPolicies() []string {
	return []string{ApprovalUntrusted, ApprovalOnFailure, ApprovalOnRequest, ApprovalNever}
}

// PromptRequest is the body of POST /v1/chats/{id}/prompt.
type PromptRequest struct {
	Text   string   `json:"text"`
	Mode   string   `json:"mode,omitempty"`
	Skills []string `json:"skills,omitempty"`
	// Synthetic, optional, is stored on the prompt's user event.
	Synthetic string `json:"synthetic,omitempty"`
	// Queue, while a run is active, stores the prompt to run when the
	// runs before it end instead of answering 409.
	Queue bool `json:"queue,omitempty"`
}

// HistoryPage answers GET /v1/chats/{id}/history: the newest events
// before a seq, oldest first, so a client opens a chat with one page and
// follows the chat socket from LastSeq.
type HistoryPage struct {
	Events []json.RawMessage `json:"events"`
	// NextBefore is the oldest seq of this page, the before of the next
	// (older) page; set only when HasMore.
	NextBefore int64 `json:"nextBefore,omitempty"`
	// LastSeq is the chat's newest stored seq (0 when it has none).
	LastSeq int64 `json:"lastSeq"`
	HasMore bool  `json:"hasMore"`
}

// UpdateChatRequest is the body of PATCH /v1/chats/{id}; absent fields
// are left as they are.
type UpdateChatRequest struct {
	Title *string `json:"title,omitempty"`
}

// UsageRow is one row of GET /v1/usage: the runs of one key (a chat,
// project, user, provider or UTC day) and their summed usage.
type UsageRow struct {
	Key                 string  `json:"key"`
	Runs                int64   `json:"runs"`
	InputTokens         int64   `json:"inputTokens"`
	OutputTokens        int64   `json:"outputTokens"`
	CacheReadTokens     int64   `json:"cacheReadTokens"`
	CacheCreationTokens int64   `json:"cacheCreationTokens"`
	CostUSD             float64 `json:"costUsd"`
}

// Run is one run in flight as GET /v1/runs lists it: a chat's turn whose
// end is not stored yet, and the remote-shim that supervises its CLI.
type Run struct {
	ChatID   string    `json:"chatId"`
	RunID    string    `json:"runId"`
	Provider string    `json:"provider"`
	Project  string    `json:"project,omitempty"`
	Owner    string    `json:"owner,omitempty"`
	Started  time.Time `json:"started"`
	// Shim is the run's supervisor: its run directory (on the host, or
	// inside Instance); nil when the run has none and ends with the daemon.
	Shim *RunShim `json:"shim"`
	// Attached: this daemon follows the run (false only for a moment
	// after a restart, or when the run could not be re-attached yet).
	Attached bool `json:"attached"`
}

// RunShim names a run's remote-shim.
type RunShim struct {
	Dir      string `json:"dir"`
	Instance string `json:"instance,omitempty"`
}

// UsageResponse answers GET /v1/usage.
type UsageResponse struct {
	Rows []UsageRow `json:"rows"`
}

// PromptResponse answers an accepted prompt (202).
type PromptResponse struct {
	RunID string `json:"runId,omitempty"`
	// QueueID is set instead of RunID when the prompt was queued.
	QueueID string `json:"queueId,omitempty"`
}

// InteractionRequest is the body of POST /v1/chats/{id}/interactions.
type InteractionRequest struct {
	InteractionID string          `json:"interactionId"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
}

// ClientMessage is one frame a client sends on the chat WebSocket.
type ClientMessage struct {
	Type          string          `json:"type"`
	Text          string          `json:"text,omitempty"`
	ClientID      string          `json:"clientId,omitempty"`
	Mode          string          `json:"mode,omitempty"`
	Skills        []string        `json:"skills,omitempty"`
	Synthetic     string          `json:"synthetic,omitempty"`
	Queue         bool            `json:"queue,omitempty"`
	InteractionID string          `json:"interactionId,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	Error         json.RawMessage `json:"error,omitempty"`
}

// Project is a project as the API returns it.
type Project struct {
	// ID is the project's immutable random id, set at creation: its
	// container carries it (provisioning.MarkerKey) and its chats are
	// bound to it (Chat.ProjectID).
	ID        string `json:"id"`
	Name      string `json:"name"`
	Owner     string `json:"owner,omitempty"`
	Container string `json:"container"`
	Image     string `json:"image,omitempty"`
	Provider  string `json:"provider,omitempty"`
	Ports     []int  `json:"ports,omitempty"`
	Autostart bool   `json:"autostart"`
	// Checkpoints is "turn" (a snapshot before each turn; "" means turn)
	// or "off".
	Checkpoints string `json:"checkpoints,omitempty"`
	// Limits are the container's LXD resource limits (nil: none).
	Limits    *ProjectLimits `json:"limits,omitempty"`
	Status    string         `json:"status"` // stored: running, stopped, missing, unknown
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt,omitzero"`

	// Credentials is the project's credential mode: "" or "shared" (the
	// host user's provider logins are pushed in and synced back), or
	// "project" (the container keeps its own login; nothing is copied
	// between it and the host).
	Credentials string `json:"credentials,omitempty"`

	// Pool is the LXD storage pool of the container's root disk ("": the
	// profile's root disk).
	Pool string `json:"pool,omitempty"`
	// Target places the container in an LXD cluster: a member name or
	// "@group" ("" = [lxd] target, else LXD decides). Location is the
	// member the container is on, as LXD last reported it (lifecycle
	// events and resync); it follows evacuations and moves.
	Target   string `json:"target,omitempty"`
	Location string `json:"location,omitempty"`

	// Repo is the git repository cloned into /workspace by the first
	// preparation of the container (nil: none).
	Repo *ProjectRepo `json:"repo,omitempty"`

	// Network is what the container may reach (nil: "open", a project
	// from before network modes).
	Network *ProjectNetwork `json:"network,omitempty"`
	// Environment is the project's environment (nil: the repository's
	// .remote/environment.toml, when it has one).
	Environment *ProjectEnvironment `json:"environment,omitempty"`
}

// Network modes of a project (ProjectNetwork.Mode).
const (
	// NetworkOff: the container has no NIC; its egress proxy refuses all
	// but the daemon's own needs (the model providers' API hosts).
	NetworkOff = "off"
	// NetworkAllowlist: the container has no NIC; its egress proxy
	// reaches the hosts [projects.network] allow and the project's Allow
	// name, and the model providers' API hosts.
	NetworkAllowlist = "allowlist"
	// NetworkOpen: the container keeps its profiles' NICs, as before
	// network modes.
	NetworkOpen = "open"
)

// ProjectNetwork is a project's network: its mode and the host patterns
// it adds to the operator's allow list ("example.com", "*.example.com",
// either with ":port"; without a port, 80 and 443).
type ProjectNetwork struct {
	Mode  string   `json:"mode"`
	Allow []string `json:"allow,omitempty"`
}

// NetworkAllowRequest is the body of POST
// /v1/projects/{name}/network/allow.
type NetworkAllowRequest struct {
	Host string `json:"host"`
}

// ProjectEnvironment is how a project's container is set up: Setup, a
// shell script run once in /workspace after the clone, as the container
// user, with only the project secrets SetupSecrets names in its
// environment (they are then kept out of the agent's); a setup that
// exits 0 is kept as an LXD snapshot named after its cache key
// (Setup, Maintenance, the image's fingerprint and the contents of
// CacheFiles, paths relative to /workspace). Maintenance runs at the
// start of each chat on a container already set up.
type ProjectEnvironment struct {
	Setup        string   `json:"setup,omitempty" toml:"setup"`
	Maintenance  string   `json:"maintenance,omitempty" toml:"maintenance"`
	SetupSecrets []string `json:"setupSecrets,omitempty" toml:"setup_secrets"`
	CacheFiles   []string `json:"cacheFiles,omitempty" toml:"cache_files"`
	// Network is the setup's and maintenance's own network: added to the
	// project's for their execs only, never the agent's.
	Network *EnvironmentNetwork `json:"network,omitempty" toml:"network"`
}

// EnvironmentNetwork is what the project environment's scripts may reach
// beyond the project's own network: hosts (patterns as in
// ProjectNetwork.Allow) allowed to the setup and maintenance execs only,
// through a one-time credential of the egress proxy.
type EnvironmentNetwork struct {
	Allow []string `json:"allow,omitempty" toml:"allow"`
}

// Environment states (EnvironmentStatus.State).
const (
	EnvironmentNone     = "none"
	EnvironmentBuilding = "building"
	EnvironmentReady    = "ready"
	EnvironmentFailed   = "failed"
)

// EnvironmentStatus is GET /v1/projects/{name}/environment: the state of
// the project's environment as the daemon last saw it (since it started),
// the cache key of the last run, when it ran, how long it took
// (milliseconds) and the tail of its output.
type EnvironmentStatus struct {
	State      string     `json:"state"`
	CacheKey   string     `json:"cacheKey,omitempty"`
	LastRun    *time.Time `json:"lastRun,omitempty"`
	DurationMS int64      `json:"duration,omitempty"`
	ExitCode   *int       `json:"exitCode,omitempty"`
	LogTail    string     `json:"logTail,omitempty"`
}

// ProjectRepo is a project's git repository: an http(s) URL without
// credentials, an optional branch or tag, and the name of the project
// secret holding the token git authenticates with (never the token).
type ProjectRepo struct {
	URL         string `json:"url"`
	Ref         string `json:"ref,omitempty"`
	TokenSecret string `json:"tokenSecret,omitempty"`
	// WebhookSecret names the project secret the forge's webhooks are
	// verified with (never the secret); "" takes no webhooks.
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// TriggerLabel is the issue label that makes an issue a task
	// ("": "remote"); TriggerPhrase the comment phrase ("": "@remote").
	TriggerLabel  string `json:"triggerLabel,omitempty"`
	TriggerPhrase string `json:"triggerPhrase,omitempty"`
	// TriggerUsers are forge users who may trigger without write access
	// to the repository.
	TriggerUsers []string `json:"triggerUsers,omitempty"`
}

// DiffFile is one changed path of a Diff. Status is git's: A (added),
// M (modified), D (deleted), T (type changed). Binary files count no
// lines.
type DiffFile struct {
	Path      string `json:"path"`
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Binary    bool   `json:"binary,omitempty"`
}

// Diff answers GET /v1/chats/{id}/diff: what changed between two git
// trees of the project's repository. Patch is the unified diff, cut at
// the daemon's byte bound (Truncated true); Files is always complete.
type Diff struct {
	Base      string     `json:"base"`
	Head      string     `json:"head"`
	Files     []DiffFile `json:"files"`
	Patch     string     `json:"patch"`
	Truncated bool       `json:"truncated"`
}

// PushRequest is the body of POST /v1/chats/{id}/push. By default the
// commit takes the tracked files' changes and the untracked files that
// .gitignore does not ignore, except common build output (__pycache__/,
// *.pyc, .pytest_cache/, .mypy_cache/, node_modules/, *.o); All takes
// those too; Paths takes only these paths of the chat's working tree
// (relative; one of All and Paths).
type PushRequest struct {
	Message string   `json:"message,omitempty"`
	All     bool     `json:"all,omitempty"`
	Paths   []string `json:"paths,omitempty"`
}

// PushResult answers POST /v1/chats/{id}/push (and is the data of the
// system/pushed event).
type PushResult struct {
	Branch string `json:"branch"`
	SHA    string `json:"sha"`
}

// PullRequestRequest is the body of POST /v1/chats/{id}/pull-request.
type PullRequestRequest struct {
	Title string `json:"title"`
	Body  string `json:"body,omitempty"`
	// Base is the branch to merge into; "" takes the project's repo.ref,
	// else the repository's default branch.
	Base string `json:"base,omitempty"`
}

// PullRequestResult answers POST /v1/chats/{id}/pull-request: the pull
// request's page and number, the pushed branch (head) and commit, and the
// base. The system/pull_request event carries {url, number}.
type PullRequestResult struct {
	URL    string `json:"url"`
	Number int    `json:"number"`
	Head   string `json:"head"`
	SHA    string `json:"sha"`
	Base   string `json:"base"`
}

// Project credential modes (Project.Credentials).
const (
	CredentialsShared  = "shared"
	CredentialsProject = "project"
)

// CreateProjectRequest is the body of POST /v1/projects.
type CreateProjectRequest struct {
	Name        string `json:"name"`
	Image       string `json:"image,omitempty"`
	Provider    string `json:"provider,omitempty"`
	Ports       []int  `json:"ports,omitempty"`
	Autostart   *bool  `json:"autostart,omitempty"`
	Checkpoints string `json:"checkpoints,omitempty"`
	// Limits: absent fields take the daemon's defaults ([projects.limits]).
	Limits *ProjectLimits `json:"limits,omitempty"`
	// Pool names an LXD storage pool for the container's root disk; it
	// must exist. Absent: [projects] pool, else the profile's root disk.
	Pool string `json:"pool,omitempty"`

	// Credentials is "shared" (default) or "project"; see Project.
	Credentials string `json:"credentials,omitempty"`
	// Target is the cluster member or "@group" for the container; see
	// Project.
	Target string `json:"target,omitempty"`
	// Repo is cloned into /workspace by the first preparation; see
	// Project.
	Repo *ProjectRepo `json:"repo,omitempty"`
	// Network: absent, [projects.network] mode and no allow of its own.
	Network *ProjectNetwork `json:"network,omitempty"`
	// Environment sets the project's environment up; see Project.
	Environment *ProjectEnvironment `json:"environment,omitempty"`
}

// ProjectLimits are a project container's resource limits: LXD
// limits.cpu, limits.memory, limits.processes and the root disk's size.
// Empty (or 0) means no limit.
type ProjectLimits struct {
	CPU       string `json:"cpu,omitempty"`
	Memory    string `json:"memory,omitempty"`
	Processes int    `json:"processes,omitempty"`
	Disk      string `json:"disk,omitempty"`
}

// PatchProjectRequest is the body of PATCH /v1/projects/{name}; absent
// fields are unchanged, a limits field set to "" (or 0) removes it.
type PatchProjectRequest struct {
	Limits *ProjectLimits `json:"limits,omitempty"`
	// Ports replace the project's ports (previews); [] removes them all.
	Ports *[]int `json:"ports,omitempty"`
	// Network replaces the project's network (mode and allow).
	Network *ProjectNetwork `json:"network,omitempty"`
	// Environment replaces the project's environment; {} removes it (the
	// repository's .remote/environment.toml applies again).
	Environment *ProjectEnvironment `json:"environment,omitempty"`
}

// Checkpoint is one LXD snapshot taken before a project-chat turn
// (GET /v1/projects/{name}/checkpoints).
type Checkpoint struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	ChatID    string    `json:"chatId"`
	Seq       int64     `json:"seq"`
	Size      int64     `json:"size,omitempty"`
}

// SecretInfo names a stored secret; values are never returned.
type SecretInfo struct {
	Key       string    `json:"key"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// PutSecretRequest is the body of PUT /v1/projects/{name}/secrets/{KEY}.
type PutSecretRequest struct {
	Value string `json:"value"`
}

// ExecRequest is the body of POST /v1/projects/{name}/exec.
type ExecRequest struct {
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Stdin   string            `json:"stdin,omitempty"`
}

// ExecFrame is one NDJSON line of an exec stream: output, then the exit code.
type ExecFrame struct {
	Stream   string `json:"stream,omitempty"` // stdout | stderr
	Data     []byte `json:"data,omitempty"`   // base64 on the wire
	ExitCode *int   `json:"exitCode,omitempty"`
	Error    string `json:"error,omitempty"`
}

// TerminalControl is a text frame on the terminal WebSocket.
type TerminalControl struct {
	Type string `json:"type"` // resize
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// ProviderInfo is one entry of GET /v1/providers.
type ProviderInfo struct {
	ID           string          `json:"id"`
	Label        string          `json:"label"`
	Enabled      bool            `json:"enabled"`
	Capabilities json.RawMessage `json:"capabilities"`
	// Readiness is the host CLI's state; absent for a disabled provider or
	// one whose adapter cannot tell.
	Readiness *ProviderReadiness `json:"readiness,omitempty"`
}

// ProviderReadiness says whether a provider's CLI can take a loose-chat
// prompt on the host now (GET /v1/providers, remotectl providers/doctor).
type ProviderReadiness struct {
	Ready         bool   `json:"ready"`
	BinaryFound   bool   `json:"binaryFound"`
	Binary        string `json:"binary"` // resolved path, or the configured name when not found
	Version       string `json:"version,omitempty"`
	TestedVersion string `json:"testedVersion,omitempty"`
	Tested        bool   `json:"tested"`
	LoggedIn      bool   `json:"loggedIn"`
	// Auth is "subscription", "api-key", "none" or "unknown".
	Auth string `json:"auth"`
	// Action is one line of what to do when not ready (or a warning, such
	// as an untested version, when ready).
	Action    string    `json:"action,omitempty"`
	CheckedAt time.Time `json:"checkedAt"`
}

// Info is GET /v1/info.
type Info struct {
	Version       string         `json:"version"`
	UptimeSeconds float64        `json:"uptimeSeconds"`
	LXD           LXDInfo        `json:"lxd"`
	Providers     []ProviderInfo `json:"providers"`
}

// LXDInfo reports whether LXD is reachable.
type LXDInfo struct {
	Reachable     bool   `json:"reachable"`
	ServerVersion string `json:"serverVersion,omitempty"`
	Server        string `json:"server,omitempty"`
	Error         string `json:"error,omitempty"`
	// URL is the configured LXD URL in use (with [lxd] urls: the member
	// the daemon talks to now); Member is that server's cluster member
	// name when Clustered.
	URL       string `json:"url,omitempty"`
	Member    string `json:"member,omitempty"`
	Clustered bool   `json:"clustered,omitempty"`
	// Pin describes the pinned server certificate ([lxd] server_cert).
	Pin string `json:"pin,omitempty"`
}

// Doctor check levels.
const (
	DoctorOK      = "ok"
	DoctorWarn    = "warn"
	DoctorProblem = "problem"
)

// DoctorCheck is one line of GET /v1/doctor.
type DoctorCheck struct {
	Name   string `json:"name"`   // e.g. "lxd", "socket", "provider claude"
	Level  string `json:"level"`  // ok, warn or problem
	Detail string `json:"detail"` // what was found, or what to do
}

// DoctorReport is GET /v1/doctor: the host checks remotectl doctor prints.
type DoctorReport struct {
	OK     bool          `json:"ok"` // no check is a problem
	Checks []DoctorCheck `json:"checks"`
}
