package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"remote/api"
	"remote/cmd/remotectl/render"
)

func init() {
	register(command{Name: "project", Usage: "create|list|show|start|stop|rm|secret|exec|shell|checkpoints|restore|limits|ports|preview|env ...", Summary: "manage projects (LXD containers), their secrets, and run commands in them", Run: runProject})
}

// projectCommands are the subcommands of `remotectl project`.
var projectCommands = map[string]command{
	"create":      {Name: "create", Usage: "NAME [-image ALIAS] [-provider ID] [-port N]... [-autostart=false] [-credentials shared|project] [-checkpoints turn|off] [-pool NAME] [-repo URL [-ref REF] [-token-secret KEY] [-webhook-secret KEY] [-trigger-label L] [-trigger-phrase P]] [--json]", Summary: "create a project (-repo: a git repository cloned into /workspace)", Run: runProjectCreate},
	"list":        {Name: "list", Usage: "[--json]", Summary: "list projects", Run: runProjectList},
	"show":        {Name: "show", Usage: "NAME [--json]", Summary: "show one project", Run: runProjectShow},
	"start":       {Name: "start", Usage: "NAME [--json]", Summary: "start the project's container (recreated if missing)", Run: runProjectStart},
	"stop":        {Name: "stop", Usage: "NAME [--json]", Summary: "stop the project's container", Run: runProjectStop},
	"rm":          {Name: "rm", Usage: "NAME [-purge]", Summary: "remove a project (-purge also deletes its container)", Run: runProjectRm},
	"secret":      {Name: "secret", Usage: "set NAME KEY (value on stdin or at a no-echo prompt) | list NAME | rm NAME KEY", Summary: "manage project secrets (values are never shown, never taken from the command line)", Run: runProjectSecret},
	"exec":        {Name: "exec", Usage: "NAME [-cwd DIR] [-env K=V]... -- COMMAND [ARG...]", Summary: "run a command in the project's container; exits with its code", Run: runProjectExec},
	"shell":       {Name: "shell", Usage: "NAME", Summary: "open an interactive shell in the project's container", Run: runProjectShell},
	"checkpoints": {Name: "checkpoints", Usage: "NAME [--json]", Summary: "list the project's checkpoints (one LXD snapshot before each chat turn)", Run: runProjectCheckpoints},
	"restore":     {Name: "restore", Usage: "NAME CHECKPOINT [--json]", Summary: "restore the project's container from a checkpoint", Run: runProjectRestore},
	"ports":       {Name: "ports", Usage: "NAME [-set PORT,PORT...] [--json]", Summary: "show or replace the project's ports (previews; -set \"\" removes them)", Run: runProjectPorts},
	"preview":     {Name: "preview", Usage: "NAME PORT [PATH]", Summary: "GET PATH (default /) from PORT in the project's container through the daemon; the body on stdout", Run: runProjectPreview},
	"env":         {Name: "env", Usage: "show|rebuild|log NAME [--json]", Summary: "the project's environment: its state, run its setup now, its last output", Run: runProjectEnv},
	"limits":      {Name: "limits", Usage: "NAME [-cpu N] [-memory SIZE] [-processes N] [-disk SIZE] [--json]", Summary: "show or change the project's resource limits (\"\" or 0 removes one)", Run: runProjectLimits},
}

func runProject(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "project", projectCommands, args)
}

// dispatch runs one subcommand of a command group.
func dispatch(ctx context.Context, e *env, group string, subs map[string]command, args []string) error {
	if len(args) == 0 {
		var names []string
		for n := range subs {
			names = append(names, n)
		}
		sort.Strings(names)
		return usagef("missing subcommand: one of %s", strings.Join(names, ", "))
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usagef("unknown subcommand %q", args[0])
	}
	err := sub.Run(ctx, e, args[1:])
	var ue *usageError
	if errors.As(err, &ue) && ue.usage == "" {
		return &usageError{msg: sub.Name + ": " + ue.msg, usage: group + " " + sub.Name + " " + sub.Usage}
	}
	return err
}

// intsFlag collects repeated integer flags.
type intsFlag []int

func (f *intsFlag) String() string { return fmt.Sprint(*f) }
func (f *intsFlag) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	*f = append(*f, n)
	return nil
}

func runProjectCreate(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("project create")
	var req api.CreateProjectRequest
	var ports intsFlag
	fs.StringVar(&req.Image, "image", "", "image `alias`, one remotectl image list shows (default: the daemon's [lxd] image, remote-dev)")
	fs.StringVar(&req.Provider, "provider", "", "default provider `id`")
	fs.Var(&ports, "port", "container `port` (repeatable)")
	autostart := fs.Bool("autostart", true, "start the container with the daemon")
	fs.StringVar(&req.Credentials, "credentials", "", "`mode`: shared (the host user's logins, default) or project (the container's own)")
	fs.StringVar(&req.Checkpoints, "checkpoints", "", "`turn` (a snapshot before each turn, the default) or off")
	fs.StringVar(&req.Pool, "pool", "", "LXD storage `pool` of the container's root disk (default: [projects] pool, else the profile's)")
	var repo api.ProjectRepo
	fs.StringVar(&repo.URL, "repo", "", "git repository `URL` (https, no credentials) cloned into /workspace at the container's first preparation")
	fs.StringVar(&repo.Ref, "ref", "", "branch or tag of -repo to check out (default: the repository's HEAD)")
	fs.StringVar(&repo.TokenSecret, "token-secret", "", "`KEY` of the project secret holding the token git and the forge get (set it with project secret set; never the token itself)")
	fs.StringVar(&repo.WebhookSecret, "webhook-secret", "", "`KEY` of the project secret the forge's webhooks are verified with (issues become chats; see docs/operating.md)")
	fs.StringVar(&repo.TriggerLabel, "trigger-label", "", "issue `label` that makes an issue a task (default remote)")
	fs.StringVar(&repo.TriggerPhrase, "trigger-phrase", "", "comment `phrase` that makes a comment a prompt (default @remote)")
	args, err := parseExact(fs, args, "NAME")
	if err != nil {
		return err
	}
	switch {
	case repo.URL != "":
		req.Repo = &repo
	case repo.Ref != "" || repo.TokenSecret != "":
		return usagef("-ref and -token-secret need -repo URL")
	case repo.WebhookSecret != "" || repo.TriggerLabel != "" || repo.TriggerPhrase != "":
		return usagef("-webhook-secret, -trigger-label and -trigger-phrase need -repo URL")
	}
	req.Name, req.Ports, req.Autostart = args[0], ports, autostart
	p, err := e.Client.CreateProject(ctx, req)
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, p)
	}
	_, err = fmt.Fprintf(e.Stdout, "%s (container %s)\n", p.Name, p.Container)
	return err
}

func runProjectList(ctx context.Context, e *env, args []string) error {
	_, err := parseExact(e.newFlags("project list"), args)
	if err != nil {
		return err
	}
	ps, err := e.Client.Projects(ctx)
	if err != nil {
		return err
	}
	return printList(e, ps, "NAME\tCONTAINER\tSTATUS\tAUTOSTART\tPROVIDER\tCREATED", func(tw io.Writer) {
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\t%s\n", p.Name, p.Container, p.Status, p.Autostart, dash(p.Provider), p.CreatedAt.Local().Format(listTime))
		}
	})
}

// dash shows an empty table cell as "-".
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printProject(e *env, p api.Project) error {
	if e.JSON {
		return writeJSON(e.Stdout, p)
	}
	tw := newTable(e.Stdout)
	fmt.Fprintf(tw, "name:\t%s\n", p.Name)
	fmt.Fprintf(tw, "owner:\t%s\n", dash(p.Owner))
	fmt.Fprintf(tw, "container:\t%s\n", p.Container)
	fmt.Fprintf(tw, "status:\t%s\n", p.Status)
	fmt.Fprintf(tw, "image:\t%s\n", dash(p.Image))
	fmt.Fprintf(tw, "provider:\t%s\n", dash(p.Provider))
	fmt.Fprintf(tw, "autostart:\t%v\n", p.Autostart)
	if p.Credentials != "" {
		fmt.Fprintf(tw, "credentials:\t%s\n", p.Credentials)
	}
	if len(p.Ports) > 0 {
		fmt.Fprintf(tw, "ports:\t%v\n", p.Ports)
	}
	fmt.Fprintf(tw, "checkpoints:\t%s\n", dash(p.Checkpoints))
	if p.Limits != nil {
		fmt.Fprintf(tw, "limits:\t%s\n", limitsText(*p.Limits))
	}
	if p.Pool != "" {
		fmt.Fprintf(tw, "pool:\t%s\n", p.Pool)
	}
	if r := p.Repo; r != nil {
		fmt.Fprintf(tw, "repo:\t%s\n", render.OneLine(r.URL, 2048))
		fmt.Fprintf(tw, "repo ref:\t%s\n", dash(render.OneLine(r.Ref, 200)))
		// The secret's name; its value never leaves the daemon.
		fmt.Fprintf(tw, "repo token secret:\t%s\n", dash(r.TokenSecret))
		if r.WebhookSecret != "" {
			fmt.Fprintf(tw, "repo webhook secret:\t%s\n", r.WebhookSecret)
		}
	}
	fmt.Fprintf(tw, "created:\t%s\n", p.CreatedAt.Local().Format("2006-01-02 15:04:05"))
	return tw.Flush()
}

// oneProject runs a NAME-only subcommand and prints the project it returns.
func oneProject(ctx context.Context, e *env, name string, args []string, call func(context.Context, string) (api.Project, error)) error {
	args, err := parseExact(e.newFlags("project "+name), args, "NAME")
	if err != nil {
		return err
	}
	p, err := call(ctx, args[0])
	if err != nil {
		return err
	}
	return printProject(e, p)
}

func runProjectShow(ctx context.Context, e *env, args []string) error {
	return oneProject(ctx, e, "show", args, e.Client.Project)
}

func runProjectStart(ctx context.Context, e *env, args []string) error {
	return oneProject(ctx, e, "start", args, e.Client.StartProject)
}

func runProjectStop(ctx context.Context, e *env, args []string) error {
	return oneProject(ctx, e, "stop", args, e.Client.StopProject)
}

func runProjectRm(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("project rm")
	purge := fs.Bool("purge", false, "also delete the project's container")
	args, err := parseExact(fs, args, "NAME")
	if err != nil {
		return err
	}
	if !*purge {
		return e.Client.DeleteProject(ctx, args[0], false)
	}
	// Deleting the container takes LXD up to a minute: say what is going
	// on, on stderr, so stdout stays empty for scripts.
	fmt.Fprintf(e.Stderr, "removing project %s and its container… ", render.OneLine(args[0], 100))
	start := time.Now()
	if err := e.Client.DeleteProject(ctx, args[0], true); err != nil {
		fmt.Fprintln(e.Stderr, "failed")
		return err
	}
	fmt.Fprintf(e.Stderr, "done in %s\n", time.Since(start).Round(time.Second))
	return nil
}

func runProjectSecret(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("project secret"), args)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return usagef("missing action: set, list or rm")
	}
	switch args[0] {
	case "set":
		switch {
		case len(args) > 3 && !(len(args) == 4 && args[3] == "-"):
			return &usageError{msg: "set: " + errSecretInArgv.Error(), usage: "project secret set NAME KEY < value"}
		case len(args) != 3 && len(args) != 4:
			return usagef("set wants NAME KEY, and the value on stdin or at the prompt")
		}
		value, err := readSecretValue(ctx, e, args[2])
		if err != nil {
			return err
		}
		return e.Client.PutSecret(ctx, args[1], args[2], value)
	case "list":
		if len(args) != 2 {
			return usagef("list wants NAME")
		}
		keys, err := e.Client.Secrets(ctx, args[1])
		if err != nil {
			return err
		}
		if e.JSON {
			return writeJSON(e.Stdout, keys)
		}
		tw := newTable(e.Stdout)
		fmt.Fprintln(tw, "KEY\tUPDATED")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\n", k.Key, k.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
		}
		return tw.Flush()
	case "rm":
		if len(args) != 3 {
			return usagef("rm wants NAME KEY")
		}
		return e.Client.DeleteSecret(ctx, args[1], args[2])
	default:
		return usagef("unknown action %q: set, list or rm", args[0])
	}
}

// exitCodeError makes remotectl exit with a command's own exit code.
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string { return fmt.Sprintf("command exited with status %d", e.code) }

// envFlag collects repeated KEY=VALUE flags.
type envFlag map[string]string

func (f envFlag) String() string { return fmt.Sprint(len(f)) }
func (f envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	f[k] = val
	return nil
}

func runProjectExec(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("project exec")
	req := api.ExecRequest{Env: map[string]string{}}
	fs.StringVar(&req.Cwd, "cwd", "", "working `directory` in the container")
	fs.Var(envFlag(req.Env), "env", "`KEY=VALUE` for the command (repeatable)")
	args, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(args) < 2 {
		return usagef("want NAME and a COMMAND")
	}
	req.Command = args[1:]
	if len(req.Env) == 0 {
		req.Env = nil
	}
	code, err := e.Client.Exec(ctx, args[0], req, e.Stdout, e.Stderr)
	if err != nil {
		if ctx.Err() != nil {
			return errInterrupted
		}
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// limitsText shows limits as cpu=.. memory=.. processes=.. disk=..
func limitsText(l api.ProjectLimits) string {
	var parts []string
	for _, kv := range [][2]string{{"cpu", l.CPU}, {"memory", l.Memory}, {"processes", strconv.Itoa(l.Processes)}, {"disk", l.Disk}} {
		if kv[1] != "" && kv[1] != "0" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func runProjectCheckpoints(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("project checkpoints"), args, "NAME")
	if err != nil {
		return err
	}
	list, err := e.Client.Checkpoints(ctx, args[0])
	if err != nil {
		return err
	}
	return printList(e, list, "NAME\tCHAT\tSEQ\tCREATED\tSIZE", func(tw io.Writer) {
		for _, c := range list {
			size := "-"
			if c.Size > 0 {
				size = strconv.FormatInt(c.Size, 10)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", c.Name, c.ChatID, c.Seq, c.CreatedAt.Local().Format(listTime), size)
		}
	})
}

func runProjectRestore(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("project restore"), args, "NAME", "CHECKPOINT")
	if err != nil {
		return err
	}
	p, err := e.Client.RestoreCheckpoint(ctx, args[0], args[1])
	if err != nil {
		return err
	}
	return printProject(e, p)
}

func runProjectLimits(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("project limits")
	var l api.ProjectLimits
	fs.StringVar(&l.CPU, "cpu", "", "CPU `count` or set (limits.cpu)")
	fs.StringVar(&l.Memory, "memory", "", "memory `size`, e.g. 2GiB (limits.memory)")
	fs.IntVar(&l.Processes, "processes", 0, "most `processes` (limits.processes)")
	fs.StringVar(&l.Disk, "disk", "", "root disk `size`, e.g. 10GiB")
	args, err := parseExact(fs, args, "NAME")
	if err != nil {
		return err
	}
	p, err := e.Client.Project(ctx, args[0])
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if len(set) > 0 { // change the named limits, keep the others
		cur := api.ProjectLimits{}
		if p.Limits != nil {
			cur = *p.Limits
		}
		if set["cpu"] {
			cur.CPU = l.CPU
		}
		if set["memory"] {
			cur.Memory = l.Memory
		}
		if set["processes"] {
			cur.Processes = l.Processes
		}
		if set["disk"] {
			cur.Disk = l.Disk
		}
		if p, err = e.Client.SetProjectLimits(ctx, args[0], cur); err != nil {
			return err
		}
	}
	if e.JSON {
		return writeJSON(e.Stdout, p.Limits)
	}
	cur := api.ProjectLimits{}
	if p.Limits != nil {
		cur = *p.Limits
	}
	_, err = fmt.Fprintln(e.Stdout, limitsText(cur))
	return err
}

func runProjectEnv(ctx context.Context, e *env, args []string) error {
	args, err := parse(e.newFlags("project env"), args)
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return usagef("want show, rebuild or log, and NAME")
	}
	var st api.EnvironmentStatus
	switch args[0] {
	case "show":
		st, err = e.Client.Environment(ctx, args[1])
	case "rebuild":
		st, err = e.Client.RebuildEnvironment(ctx, args[1])
	case "log":
		log, err := e.Client.EnvironmentLog(ctx, args[1])
		if err != nil {
			return err
		}
		_, err = io.WriteString(e.Stdout, log)
		return err
	default:
		return usagef("unknown action %q: show, rebuild or log", args[0])
	}
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, st)
	}
	fmt.Fprintf(e.Stdout, "state:     %s\n", st.State)
	if st.CacheKey != "" {
		fmt.Fprintf(e.Stdout, "cache key: %s\n", st.CacheKey)
	}
	if st.LastRun != nil {
		fmt.Fprintf(e.Stdout, "last run:  %s (%s)\n", st.LastRun.Local().Format("2006-01-02 15:04:05"), (time.Duration(st.DurationMS) * time.Millisecond).Round(time.Millisecond))
	}
	if st.ExitCode != nil {
		fmt.Fprintf(e.Stdout, "exit code: %d\n", *st.ExitCode)
	}
	if st.LogTail != "" {
		fmt.Fprintf(e.Stdout, "output (tail):\n%s", st.LogTail)
		if !strings.HasSuffix(st.LogTail, "\n") {
			fmt.Fprintln(e.Stdout)
		}
	}
	return nil
}
