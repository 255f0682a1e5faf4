package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"remote/api"
	"remote/cmd/remotectl/render"
)

func init() {
	register(command{Name: "info", Usage: "[--json]", Summary: "show the daemon's version, uptime, LXD and providers", Run: runInfo})
	register(command{Name: "providers", Usage: "[--json] | install PROVIDER[@VERSION] [-untested] | select PROVIDER@VERSION | login [-method M] PROVIDER | logout PROVIDER", Summary: "list the agent providers (installed, version, login, CLI store, what to do); install or select a CLI in the store; log a host CLI in or out", Run: runProviders})
	register(command{Name: "doctor", Usage: "[--json]", Summary: "check the host (LXD, socket, host user, space, providers, secrets key); exit 1 on a problem", Run: runDoctor})
	register(command{Name: "chat", Usage: "create|list|show|rm|fork|diff|push|pr ...", Summary: "manage chats", Run: runChat})
	register(command{Name: "events", Usage: "CHAT [-since SEQ] [--json] [--raw]", Summary: "print a chat's stored events", Run: runEvents})
	register(command{Name: "prompt", Usage: "CHAT TEXT... [-mode default|plan] [-skill NAME]... [-queue] [--raw]", Summary: "send a prompt and stream the reply until the run ends (Ctrl-C cancels it)", Run: runPrompt})
	register(command{Name: "tail", Usage: "CHAT [-since SEQ] [--json] [--raw]", Summary: "follow a chat's events live", Run: runTail})
	register(command{Name: "cancel", Usage: "CHAT", Summary: "cancel a chat's running prompt", Run: runCancel})
	register(command{Name: "answer", Usage: "CHAT INTERACTION accept|decline|cancel", Summary: "answer a pending approval (an interaction_request) of a chat's run", Run: runAnswer})
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runInfo(ctx context.Context, e *env, args []string) error {
	_, err := parseExact(e.newFlags("info"), args)
	if err != nil {
		return err
	}
	info, err := e.Client.Info(ctx)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, info)
	}
	lxd := "unreachable"
	if info.LXD.Reachable {
		lxd = "reachable"
		if info.LXD.ServerVersion != "" {
			lxd += ", server " + info.LXD.ServerVersion
		}
		if info.LXD.Member != "" {
			lxd += ", cluster member " + info.LXD.Member
		}
		if info.LXD.URL != "" {
			lxd += " at " + info.LXD.URL
		}
	} else if info.LXD.Error != "" {
		lxd += ": " + info.LXD.Error
	}
	var ps []string
	for _, p := range info.Providers {
		if p.Enabled {
			ps = append(ps, p.ID)
		}
	}
	tw := newTable(e.Stdout)
	fmt.Fprintf(tw, "version:\t%s\n", info.Version)
	fmt.Fprintf(tw, "uptime:\t%s\n", (time.Duration(info.UptimeSeconds) * time.Second).String())
	fmt.Fprintf(tw, "lxd:\t%s\n", lxd)
	fmt.Fprintf(tw, "providers:\t%s\n", strings.Join(ps, ", "))
	return tw.Flush()
}

func runProviders(ctx context.Context, e *env, args []string) error {
	if len(args) > 0 && (args[0] == "install" || args[0] == "select") {
		return runProvidersStore(ctx, e, args[0], args[1:])
	}
	if len(args) > 0 && (args[0] == "login" || args[0] == "logout") { // login.go
		return map[string]func(context.Context, *env, []string) error{"login": runProvidersLogin, "logout": runProvidersLogout}[args[0]](ctx, e, args[1:])
	}
	_, err := parseExact(e.newFlags("providers"), args)
	if err != nil {
		return err
	}
	ps, err := e.Client.Providers(ctx)
	if err != nil {
		return err
	}
	err = printList(e, ps, "ID\tLABEL\tENABLED\tREADY\tVERSION\tAUTH\tMODELS\tFEATURES", func(tw io.Writer) {
		for _, p := range ps {
			models, features := describeCapabilities(p.Capabilities)
			ready, version, auth := describeReadiness(p)
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\n", p.ID, p.Label, p.Enabled, ready, version, auth, models, features)
		}
	})
	if err != nil || e.JSON {
		return err
	}
	// What to do, one line per provider that needs something.
	for _, p := range ps {
		if r := p.Readiness; r != nil && r.Action != "" {
			fmt.Fprintf(e.Stdout, "%s: %s\n", p.ID, r.Action)
		}
	}
	// The CLI store (project containers); a daemon without one says 404.
	if entries, err := e.Client.CLIStore(ctx); err == nil {
		printStore(e, entries)
	}
	return nil
}

// describeReadiness renders a provider's readiness for the table: ready
// (yes, no, or - when the adapter reports none), the version (with
// "untested" when it is not the tested one) and how it is logged in.
func describeReadiness(p api.ProviderInfo) (ready, version, auth string) {
	r := p.Readiness
	if r == nil {
		return "-", "-", "-"
	}
	ready, version, auth = "no", r.Version, r.Auth
	if r.Ready {
		ready = "yes"
	}
	switch {
	case !r.BinaryFound:
		version = "not installed"
	case version == "":
		version = "?"
	case !r.Tested && r.TestedVersion != "":
		version += " (untested)"
	}
	return ready, version, auth
}

// runDoctor prints the daemon's host checks, one line each, and fails
// when any is a problem (or the daemon cannot be reached).
func runDoctor(ctx context.Context, e *env, args []string) error {
	if _, err := parseExact(e.newFlags("doctor"), args); err != nil {
		return err
	}
	rep, err := e.Client.Doctor(ctx)
	if err != nil {
		fmt.Fprintf(e.Stdout, "problem  daemon: %v\n", err)
		return fmt.Errorf("doctor: the daemon did not answer: %w", err)
	}
	if e.JSON {
		if err := writeJSON(e.Stdout, rep); err != nil {
			return err
		}
	} else {
		tw := newTable(e.Stdout)
		for _, c := range rep.Checks {
			fmt.Fprintf(tw, "%s\t%s:\t%s\n", c.Level, c.Name, c.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	problems := 0
	for _, c := range rep.Checks {
		if c.Level == api.DoctorProblem {
			problems++
		}
	}
	if problems > 0 {
		return fmt.Errorf("doctor: %d problem(s)", problems)
	}
	return nil
}

// describeCapabilities renders a provider's capabilities for a table: its
// models (the default one starred) and the names of the features it has,
// sorted. Unknown fields are shown by name when true, so a newer daemon's
// capabilities still read well; --json has everything.
func describeCapabilities(raw json.RawMessage) (models, features string) {
	var caps map[string]any
	if json.Unmarshal(raw, &caps) != nil {
		return "-", render.Compact(raw, 60)
	}
	def, _ := caps["defaultModel"].(string)
	var ms, fs []string
	if list, ok := caps["models"].([]any); ok {
		for _, m := range list {
			if s, ok := m.(string); ok {
				if s == def {
					s += "*"
				}
				ms = append(ms, s)
			}
		}
	}
	for k, v := range caps {
		if v == true {
			fs = append(fs, k)
		}
	}
	sort.Strings(fs)
	if len(ms) == 0 {
		ms = []string{"-"}
	}
	if len(fs) == 0 {
		fs = []string{"-"}
	}
	return strings.Join(ms, ","), strings.Join(fs, ",")
}

// chatCommands are the subcommands of `remotectl chat`.
var chatCommands = map[string]command{
	"create": {Name: "create", Usage: "[-provider ID] [-project NAME] [-cwd DIR] [-model M] [-title T] [-approval POLICY] [-effort E] [-branch NAME [-worktree]] [--json]", Summary: "create a chat and print its id (-branch: its own git branch in a project with a repository)", Run: runChatCreate},
	"list":   {Name: "list", Usage: "[--json]", Summary: "list chats", Run: runChatList},
	"show":   {Name: "show", Usage: "CHAT [--json]", Summary: "show one chat", Run: runChatShow},
	"rm":     {Name: "rm", Usage: "CHAT...", Summary: "delete chats and their events", Run: runChatRm},
	"diff":   {Name: "diff", Usage: "CHAT [-turn SEQ] [--json]", Summary: "what a project chat changed in its repository: one turn (-turn: the seq of its user event) or all (the working tree against the cloned commit)", Run: runChatDiff},
	"push":   {Name: "push", Usage: "CHAT [-m MESSAGE] [-all] [--json] [-- PATH...]", Summary: "commit what is uncommitted on the chat's branch and push it to the project's repository: tracked changes and untracked files .gitignore does not ignore, but build output (__pycache__/, *.pyc, .pytest_cache/, .mypy_cache/, node_modules/, *.o); -all: that too; PATH...: only these (relative to the chat's working tree)", Run: runChatPush},
	"pr":     {Name: "pr", Usage: "CHAT -title T [-body B] [-base BRANCH] [--json]", Summary: "push the chat's branch and open a pull request of it on the repository's forge (-base: default the project's repo.ref, else the repository's default branch)", Run: runChatPR},
	"fork":   {Name: "fork", Usage: "CHAT [-at SEQ [-with-container]] [--json]", Summary: "fork a chat and print the new id (-at: before the turn holding SEQ; -with-container: also copy that turn's checkpoint into a new project)", Run: runChatFork},
}

func runChat(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		var names []string
		for n := range chatCommands {
			names = append(names, n)
		}
		sort.Strings(names)
		return usagef("missing subcommand: one of %s", strings.Join(names, ", "))
	}
	sub, ok := chatCommands[args[0]]
	if !ok {
		return usagef("unknown subcommand %q", args[0])
	}
	err := sub.Run(ctx, e, args[1:])
	usage := "chat " + sub.Name + " " + sub.Usage
	var he *helpError
	if errors.As(err, &he) {
		return &usageError{msg: "help requested", usage: usage, help: he}
	}
	var ue *usageError
	if errors.As(err, &ue) {
		return &usageError{msg: sub.Name + ": " + ue.msg, usage: usage}
	}
	return err
}

func runChatCreate(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("chat create")
	var req api.CreateChatRequest
	fs.StringVar(&req.Provider, "provider", "claude", "provider `id`")
	fs.StringVar(&req.Project, "project", "", "project `name` (none: a loose chat on the host)")
	fs.StringVar(&req.Cwd, "cwd", "", "working `directory` of a loose chat")
	fs.StringVar(&req.Model, "model", "", "`model`")
	fs.StringVar(&req.Title, "title", "", "`title`")
	fs.StringVar(&req.ApprovalPolicy, "approval", "", "approval `policy`: "+strings.Join(api.ApprovalPolicies(), " | ")+
		" (codex and minimax; none: never ask)")
	fs.StringVar(&req.ReasoningEffort, "effort", "", "reasoning `effort`, one the provider declares (see remotectl providers)")
	fs.StringVar(&req.Branch, "branch", "", "the chat's own git `branch` (a project with a repository; made from its base at the first turn)")
	fs.BoolVar(&req.Worktree, "worktree", false, "work in a git worktree of -branch of its own, beside the project's other chats")
	_, err := parseExact(fs, args)
	if err != nil {
		return err
	}
	if req.ApprovalPolicy != "" && !slices.Contains(api.ApprovalPolicies(), req.ApprovalPolicy) {
		return usagef("-approval: unknown policy %q (want %s)", req.ApprovalPolicy, strings.Join(api.ApprovalPolicies(), ", "))
	}
	c, err := e.Client.CreateChat(ctx, req)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, c)
	}
	_, err = fmt.Fprintln(e.Stdout, c.ID)
	return err
}

func runChatList(ctx context.Context, e *env, args []string) error {
	_, err := parseExact(e.newFlags("chat list"), args)
	if err != nil {
		return err
	}
	chats, err := e.Client.Chats(ctx)
	if err != nil {
		return err
	}
	return printList(e, chats, "ID\tPROVIDER\tPROJECT\tRUNNING\tCREATED\tTITLE", func(tw io.Writer) {
		for _, c := range chats {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", c.ID, c.Provider, dash(c.Project), c.Running, c.CreatedAt.Local().Format(listTime), render.OneLine(c.Title, 50))
		}
	})
}

func runChatShow(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("chat show"), args, "CHAT")
	if err != nil {
		return err
	}
	c, err := e.Client.Chat(ctx, args[0])
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, c)
	}
	tw := newTable(e.Stdout)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", c.ID)
	row("title", c.Title)
	row("owner", c.Owner)
	row("provider", c.Provider)
	row("project", c.Project)
	row("branch", c.Branch)
	if c.Worktree {
		row("worktree", "/workspace/.worktrees/"+c.ID)
	}
	row("cwd", c.Cwd)
	row("model", c.Model)
	row("mode", c.Mode)
	row("approval", c.ApprovalPolicy)
	row("effort", c.ReasoningEffort)
	var sess []string
	for p, id := range c.Sessions {
		sess = append(sess, p+"="+id)
	}
	sort.Strings(sess)
	row("sessions", strings.Join(sess, " "))
	row("skills", strings.Join(c.SelectedSkills, ", "))
	if c.ForkPending {
		row("fork pending", "true")
	}
	row("running", strconv.FormatBool(c.Running))
	row("created", c.CreatedAt.Local().Format(time.RFC3339))
	if !c.LastMessageAt.IsZero() {
		row("last message", c.LastMessageAt.Local().Format(time.RFC3339))
	}
	return tw.Flush()
}

func runChatRm(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("chat rm"), args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usagef("want at least one CHAT")
	}
	for _, id := range args {
		if err := e.Client.DeleteChat(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func runChatFork(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("chat fork")
	at := fs.Int64("at", 0, "fork before the turn holding event `seq`")
	withContainer := fs.Bool("with-container", false, "also copy the turn's checkpoint into a new project (needs -at)")
	args, err := parseExact(fs, args, "CHAT")
	if err != nil {
		return err
	}
	if *withContainer && *at <= 0 {
		return usagef("-with-container needs -at SEQ")
	}
	var c api.Chat
	if *at > 0 {
		c, err = e.Client.ForkChatAt(ctx, args[0], *at, *withContainer)
	} else {
		c, err = e.Client.ForkChat(ctx, args[0])
	}
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, c)
	}
	if *withContainer {
		_, err = fmt.Fprintf(e.Stdout, "%s (project %s)\n", c.ID, c.Project)
		return err
	}
	_, err = fmt.Fprintln(e.Stdout, c.ID)
	return err
}

func runChatDiff(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("chat diff")
	turn := fs.Int64("turn", 0, "only the turn whose user event has `seq`")
	args, err := parseExact(fs, args, "CHAT")
	if err != nil {
		return err
	}
	d, err := e.Client.ChatDiff(ctx, args[0], *turn)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, d)
	}
	for _, f := range d.Files {
		counts := fmt.Sprintf("+%d -%d", f.Additions, f.Deletions)
		if f.Binary {
			counts = "binary"
		}
		if _, err := fmt.Fprintf(e.Stdout, "%s %s (%s)\n", f.Status, f.Path, counts); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprint(e.Stdout, d.Patch); err != nil {
		return err
	}
	if d.Truncated {
		_, err = fmt.Fprintln(e.Stdout, "[patch truncated: [projects] max_diff_bytes]")
	}
	return err
}

func runChatPush(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("chat push")
	var req api.PushRequest
	fs.StringVar(&req.Message, "m", "", "the commit `message` (default: the daemon's)")
	fs.BoolVar(&req.All, "all", false, "also commit untracked build output (__pycache__/, *.pyc, node_modules/, …); never what .gitignore ignores")
	args, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usagef("want CHAT [-- PATH...]")
	}
	req.Paths = args[1:]
	if req.All && len(req.Paths) > 0 {
		return usagef("chat push: -all and paths: give one of them")
	}
	res, err := e.Client.PushChat(ctx, args[0], req)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, res)
	}
	_, err = fmt.Fprintf(e.Stdout, "pushed %s at %s\n", res.Branch, res.SHA)
	return err
}

func runChatPR(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("chat pr")
	var req api.PullRequestRequest
	fs.StringVar(&req.Title, "title", "", "the pull request's `title` (required; also the commit message)")
	fs.StringVar(&req.Body, "body", "", "the pull request's description")
	fs.StringVar(&req.Base, "base", "", "the `branch` to merge into")
	args, err := parseExact(fs, args, "CHAT")
	if err != nil {
		return err
	}
	if req.Title == "" {
		return usagef("chat pr: -title is required")
	}
	res, err := e.Client.OpenPullRequest(ctx, args[0], req)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, res)
	}
	_, err = fmt.Fprintf(e.Stdout, "pull request #%d: %s (%s into %s)\n", res.Number, res.URL, res.Head, res.Base)
	return err
}

func runEvents(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("events")
	since := fs.Int64("since", 0, "only events after `seq`")
	rawFlag(fs, e)
	args, err := parseExact(fs, args, "CHAT")
	if err != nil {
		return err
	}
	evs, err := e.Client.Events(ctx, args[0], *since)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, evs)
	}
	r := render.New(e.Stdout, e.Stderr, e.Color, e.Raw, false)
	for _, ev := range evs {
		r.Event(ev)
	}
	r.Finish()
	return nil
}

func runCancel(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("cancel"), args, "CHAT")
	if err != nil {
		return err
	}
	return e.Client.Cancel(ctx, args[0])
}

// decisions are the approval answers `remotectl answer` sends as
// {"decision": D}: Codex's accept, decline and cancel.
var decisions = []string{"accept", "decline", "cancel"}

func runAnswer(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("answer"), args, "CHAT", "INTERACTION", "DECISION")
	if err != nil {
		return err
	}
	if !slices.Contains(decisions, args[2]) {
		return usagef("unknown decision %q (want %s)", args[2], strings.Join(decisions, ", "))
	}
	result, err := json.Marshal(map[string]string{"decision": args[2]})
	if err != nil {
		return fmt.Errorf("encode decision %q: %w", args[2], err)
	}
	return e.Client.AnswerInteraction(ctx, args[0], api.InteractionRequest{InteractionID: args[1], Result: result})
}
