package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"remote/client"
	"remote/config"
	"remote/internal/version"
)

// defaultConfig is where remoted's TOML lives; remotectl reads the socket
// path from it.
const defaultConfig = "/etc/remote/remoted.toml"

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// env is what a command runs with. Client is connected lazily; commands
// write results to Stdout and diagnostics to Stderr.
type env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// JSON asks read commands for JSON instead of tables (--json, global or
	// per command).
	JSON bool
	// Client talks to the daemon.
	Client *client.Client
	// Color is whether Stderr takes ANSI styling (a terminal, NO_COLOR unset).
	Color bool
	// Raw prints agent text with its terminal control sequences (--raw);
	// by default they are stripped (render.StripControls).
	Raw bool
}

// command is one top-level remotectl command. Files add theirs with
// register from an init function (e.g. project*.go registers "project").
type command struct {
	Name    string // the word typed after remotectl
	Usage   string // argument synopsis, e.g. "CHAT TEXT"
	Summary string // one line for the command list
	Run     func(ctx context.Context, e *env, args []string) error
}

var commands = map[string]command{}

// register adds c to the command table; a duplicate name is a programming
// error and panics at start-up.
func register(c command) {
	if _, dup := commands[c.Name]; dup {
		panic("remotectl: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// usageError is a mistake in the command line: exit 2, usage shown. usage,
// when set, is the synopsis of the (sub)command that was misused; a wrapped
// helpError makes it a request for help instead.
type usageError struct {
	msg, usage string
	help       *helpError
}

func (e *usageError) Unwrap() error {
	if e.help == nil {
		return nil
	}
	return e.help
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// helpError is -h or -help on a command: its synopsis and flags go to
// stdout and remotectl exits 0.
type helpError struct{ fs *flag.FlagSet }

func (e *helpError) Error() string { return "help requested" }

// errInterrupted means the user pressed Ctrl-C; what was running was
// cancelled.
var errInterrupted = errors.New("interrupted")

// run is remotectl without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Color: isTerminal(stderr) && os.Getenv("NO_COLOR") == ""}
	fs := flag.NewFlagSet("remotectl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", "", "daemon socket `path` (default: from the config file, else "+client.DefaultSocket+")")
	cfgPath := fs.String("config", defaultConfig, "remoted's config `file`, read for the socket path")
	fs.BoolVar(&e.JSON, "json", false, "print JSON instead of tables")
	rawFlag(fs, e)
	showVersion := fs.Bool("version", false, "print remotectl's version and exit (remotectl info shows the daemon's)")
	// Parse calls Usage on -h and on a bad flag before it returns the
	// error; both cases print the usage below, once, where it belongs.
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "remotectl: %v\n", err)
		printUsage(stderr, fs)
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "remotectl", version.String())
		return exitOK
	}
	if fs.NArg() == 0 {
		printUsage(stderr, fs)
		return exitUsage
	}
	name := fs.Arg(0)
	if name == "help" {
		printUsage(stdout, fs)
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "remotectl: unknown command %q (see remotectl help)\n", name)
		return exitUsage
	}
	path, err := socketPath(*socket, *cfgPath, flagSet(fs, "config"))
	if err != nil {
		fmt.Fprintf(stderr, "remotectl: %v\n", err)
		return exitFailure
	}
	e.Client = client.New(path)
	err = cmd.Run(ctx, e, fs.Args()[1:])
	var ue *usageError
	var he *helpError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &he):
		usage := name + " " + cmd.Usage
		if errors.As(err, &ue) && ue.usage != "" {
			usage = ue.usage
		}
		fmt.Fprintf(stdout, "usage: remotectl %s\n", usage)
		he.fs.SetOutput(stdout)
		he.fs.PrintDefaults()
		return exitOK
	case errors.As(err, &ue):
		usage := ue.usage
		if usage == "" {
			usage = name + " " + cmd.Usage
		}
		fmt.Fprintf(stderr, "remotectl %s: %v\nusage: remotectl %s\n", name, err, usage)
		return exitUsage
	case errors.As(err, new(*exitCodeError)):
		// project exec: remotectl exits with the command's own status.
		var ce *exitCodeError
		errors.As(err, &ce)
		return ce.code
	case errors.Is(err, errInterrupted):
		fmt.Fprintf(stderr, "remotectl: %v\n", err)
		return exitInterrupted
	default:
		fmt.Fprintf(stderr, "remotectl: %v\n", err)
		return exitFailure
	}
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// socketPath picks the daemon socket: -socket, else [daemon] socket of the
// config file, else the default. A missing or unreadable default config
// file is not an error; an explicit -config that fails to load is.
func socketPath(flagSocket, cfgPath string, explicit bool) (string, error) {
	if flagSocket != "" {
		return flagSocket, nil
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		if !explicit && (errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission)) {
			return client.DefaultSocket, nil
		}
		return "", fmt.Errorf("read socket path from %s: %w", cfgPath, err)
	}
	if cfg.Daemon.Socket == "" {
		return client.DefaultSocket, nil
	}
	return cfg.Daemon.Socket, nil
}

func printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintln(w, "usage: remotectl [-socket PATH] [-config FILE] [--json] [--raw] COMMAND [ARGS]\n       remotectl -version")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, n := range names {
		c := commands[n]
		fmt.Fprintf(tw, "  %s %s\t%s\n", n, c.Usage, c.Summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nglobal flags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// newFlags returns a command's flag set with --json bound to e.JSON.
func (e *env) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.BoolVar(&e.JSON, "json", e.JSON, "print JSON")
	return fs
}

// parse parses args with flags and positional arguments in any order
// (`chat show ID --json` as well as `chat show --json ID`); "--" ends flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpError{fs}
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// parseExact is parse followed by a check that the positional arguments
// are exactly as many as names (which name them in the usage error).
func parseExact(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	args, err := parse(fs, args)
	if err != nil {
		return nil, err
	}
	if len(args) != len(names) {
		return nil, usagef("want %d argument(s) (%s), got %d", len(names), strings.Join(names, " "), len(args))
	}
	return args, nil
}

// listTime is how list tables show a time.
const listTime = "2006-01-02 15:04"

// printList prints v as indented JSON with --json, else as a table: the
// tab-separated header, then what rows writes.
func printList(e *env, v any, header string, rows func(tw io.Writer)) error {
	if e.JSON {
		return writeJSON(e.Stdout, v)
	}
	tw := newTable(e.Stdout)
	fmt.Fprintln(tw, header)
	rows(tw)
	return tw.Flush()
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
