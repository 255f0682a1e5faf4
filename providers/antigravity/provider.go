package antigravity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"remote/providers"
	"remote/providers/runner"
)

// DefaultBinary is the CLI run when the config names none.
const DefaultBinary = "agy"

// PrintTimeout is passed as --print-timeout so the CLI does not stop a
// long turn on its own.
const PrintTimeout = "240m"

// chunkSize bounds one read of stdout, hence one assistant delta.
const chunkSize = 32 << 10

// Efforts are the --effort levels passed through; others are dropped.
var Efforts = []string{"low", "medium", "high"}

// ErrNotWired is providers.ErrNotWired (kept so callers of this adapter
// need not import providers to test for it).
var ErrNotWired = providers.ErrNotWired

// ErrNotSignedIn classifies a run that failed because the CLI has no
// login; the run.failed event carries SignInInstruction.
var ErrNotSignedIn = errors.New("antigravity not signed in")

// Provider runs the Antigravity CLI. Create it with New.
type Provider struct {
	cfg providers.AdapterConfig
	log hclog.Logger
}

var _ providers.Provider = (*Provider)(nil)

// New returns the Antigravity adapter. An empty cfg.Binary runs
// DefaultBinary; a nil cfg.Host uses a runner.HostLauncher; a nil logger
// discards.
func New(cfg providers.AdapterConfig) *Provider {
	cfg = runner.HostDefaults(cfg, DefaultBinary)
	return &Provider{cfg: cfg, log: runner.AdapterLogger(cfg.Logger, "antigravity")}
}

// ID returns providers.Antigravity.
func (p *Provider) ID() providers.ProviderID { return providers.Antigravity }

// Capabilities declares resume and plan mode; no fork, no credential sync.
func (p *Provider) Capabilities(context.Context, providers.CapabilityRequest) (providers.Capabilities, error) {
	return providers.Capabilities{
		Label:    "Antigravity",
		Efforts:  slices.Clone(Efforts),
		Resume:   true,
		PlanMode: true,
		Skills:   providers.SkillsInstructions,
	}, nil
}

// Args returns the CLI arguments for req. The prompt is not among them,
// and neither is --print (-p, --prompt): without a prompt flag, agy 1.1.1
// and later read the prompt from a stdin that is not a terminal and run it
// in print mode (google-antigravity/antigravity-cli#582, quoting the 1.1.1
// changelog: stdin is no longer read "when a prompt is provided via a
// flag"), and Run writes it there. Argv is readable by every local user in
// /proc/PID/cmdline and bounded by the kernel's 128 KiB per argument.
func Args(req providers.RunRequest, extra []string) []string {
	args := []string{"--print-timeout", PrintTimeout}
	if req.Mode == providers.ModePlan {
		args = append(args, "--mode", "plan")
	} else {
		args = append(args, "--dangerously-skip-permissions")
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if e := req.Preferences.ReasoningEffort; slices.Contains(Efforts, e) {
		args = append(args, "--effort", e)
	}
	if req.ResumeID != "" {
		args = append(args, "--conversation", req.ResumeID)
	}
	return append(args, extra...)
}

// Run executes one turn (S25). It returns nil on success or cancellation;
// after a sign-in failure it emits run.failed with SignInInstruction and
// returns an error wrapping providers.ErrRunFailed and ErrNotSignedIn;
// another failure returns a *runner.ProcessError carrying the last 4 KiB
// of the combined output.
func (p *Provider) Run(ctx context.Context, req providers.RunRequest, emit func(providers.Event)) error {
	if req.Fork {
		req.Fork, req.ResumeID = false, "" // no native fork: start fresh
	}
	out := providers.StampEvents(emit, providers.Antigravity, req)

	// The prompt goes to stdin on both sides. No credential sync: the
	// adapter declares none.
	args := Args(req, p.cfg.Args)
	launch, err := runner.ResolveLaunch(ctx, p.cfg, runner.LaunchSpec{
		Provider: providers.Antigravity, NotWired: ErrNotWired, HostArgs: args, ContainerArgs: args,
	}, req, out)
	if err != nil {
		if ctx.Err() != nil {
			return nil // cancelled while preparing: a normal stop (S29)
		}
		return err
	}
	launcher, cmd := launch.Launcher, launch.Command
	var list lister
	if req.ProjectID == "" {
		list = hostLister(filepath.Join(hostHome(cmd.Env), BrainDir))
	} else {
		list = containerLister(launcher, runner.ContainerHome+"/"+BrainDir)
	}

	// Session discovery only for a fresh conversation (S25).
	var before map[string]bool
	if req.ResumeID == "" {
		if before, err = list(ctx); err != nil {
			p.log.Warn("brain directory snapshot failed; no session will be saved", "error", err)
			before = nil
		}
	}

	waitErr, output, err := p.stream(ctx, launcher, cmd, req.Prompt, out)
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return err
	}
	if waitErr != nil {
		if needsSignIn(output) {
			out(providers.Event{Type: providers.EventRunFailed, Message: SignInInstruction})
			return fmt.Errorf("%w: %w: %w", providers.ErrRunFailed, ErrNotSignedIn, waitErr)
		}
		return &runner.ProcessError{Err: waitErr, Stderr: output}
	}
	if before != nil {
		if after, err := list(ctx); err != nil {
			p.log.Warn("brain directory listing failed; no session saved", "error", err)
		} else if id := newConversation(before, after); id != "" {
			out(providers.Event{Type: providers.EventSessionUpdated, SessionID: id, Model: req.Model})
		}
	}
	out(providers.Event{Type: providers.EventRunCompleted, Model: req.Model})
	return nil
}

// hostHome is HOME of a host command's environment (the configured or
// runtime HOME, else the daemon's), or the daemon user's home directory
// when that is empty.
func hostHome(env []string) string {
	for _, kv := range env {
		if h, ok := strings.CutPrefix(kv, "HOME="); ok && h != "" {
			return h
		}
	}
	h, _ := os.UserHomeDir()
	return h
}

// stream runs cmd with prompt on its stdin, emitting stdout chunks as
// assistant deltas, and returns the process result and the tail of the
// combined output.
func (p *Provider) stream(ctx context.Context, l providers.Launcher, cmd providers.Command, prompt string, emit func(providers.Event)) (waitErr error, output string, err error) {
	proc, err := l.Start(ctx, cmd)
	if err != nil {
		return nil, "", fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	// The CLI reads all of stdin before it answers; writing from another
	// goroutine keeps a CLI that exits early (or never reads) from
	// blocking the run: the write fails once the process is gone.
	go func() {
		stdin := proc.Stdin()
		if _, err := io.WriteString(stdin, prompt); err != nil {
			p.log.Debug("writing the prompt to stdin failed", "error", err)
		}
		if err := stdin.Close(); err != nil {
			p.log.Debug("closing stdin failed", "error", err)
		}
	}()
	// Separate tails, joined stdout first: the process writes both
	// streams concurrently, and the stderr explanation must not be pushed
	// out by stdout data read later.
	var outTail, errTail tail
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(&errTail, proc.Stderr())
	}()
	var ch chunker
	buf := make([]byte, chunkSize)
	stdout := proc.Stdout()
	for {
		n, rerr := stdout.Read(buf)
		if n > 0 {
			outTail.Write(buf[:n])
			if text := ch.push(buf[:n]); text != "" {
				emit(providers.Event{Type: providers.EventAssistantDelta, ItemKind: "message", Role: "assistant", Text: text})
			}
		}
		if rerr != nil {
			if !errors.Is(rerr, io.EOF) && ctx.Err() == nil {
				p.log.Warn("reading stdout failed", "error", rerr)
			}
			break
		}
	}
	if text := ch.flush(); text != "" {
		emit(providers.Event{Type: providers.EventAssistantDelta, ItemKind: "message", Role: "assistant", Text: text})
	}
	_, _ = io.Copy(io.Discard, stdout)
	<-stderrDone
	return proc.Wait(), combine(outTail.String(), errTail.String()), nil
}
