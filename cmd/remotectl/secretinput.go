package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// maxSecretInput bounds a secret value read from stdin.
const maxSecretInput = 64 << 10

// errSecretInArgv refuses a secret value on the command line, where every
// local user sees it in ps and /proc/PID/cmdline and the shell keeps it in
// its history. The message never repeats the value.
var errSecretInArgv = errors.New("the secret value is not taken from the command line (every local user can read it in ps, and the shell keeps it in its history): " +
	"type it at the prompt, which does not echo, or pipe it in, e.g. `printenv TOKEN | remotectl project secret set NAME KEY`")

// readSecretValue reads a secret's value from e.Stdin: on a terminal from
// a prompt that does not echo, otherwise everything piped in (one trailing
// newline dropped).
func readSecretValue(ctx context.Context, e *env, key string) (string, error) {
	if f, ok := e.Stdin.(*os.File); ok {
		if saved, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			return promptNoEcho(ctx, e, f, saved, key)
		}
	}
	b, err := io.ReadAll(io.LimitReader(e.Stdin, maxSecretInput+1))
	if err != nil {
		return "", fmt.Errorf("read secret value from stdin: %w", err)
	}
	if len(b) > maxSecretInput {
		return "", fmt.Errorf("secret value on stdin is longer than %d bytes", maxSecretInput)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// promptNoEcho asks for the value on the terminal tty with echo turned off
// (the newline still echoes) and restores the terminal's settings however
// the read ends, Ctrl-C included.
func promptNoEcho(ctx context.Context, e *env, tty *os.File, saved *unix.Termios, key string) (string, error) {
	fd := int(tty.Fd())
	quiet := *saved
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ECHONL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &quiet); err != nil {
		return "", fmt.Errorf("turn off echo on the terminal: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, saved)
	fmt.Fprintf(e.Stderr, "value of %s (not echoed): ", key)
	type line struct {
		s   string
		err error
	}
	got := make(chan line, 1)
	go func() {
		s, err := bufio.NewReaderSize(io.LimitReader(tty, maxSecretInput+2), 4096).ReadString('\n')
		got <- line{s, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(e.Stderr)
		return "", fmt.Errorf("%w: no secret set", errInterrupted)
	case l := <-got:
		if l.err != nil && !errors.Is(l.err, io.EOF) {
			return "", fmt.Errorf("read secret value from the terminal: %w", l.err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(l.s, "\n"), "\r")
		switch {
		case len(v) > maxSecretInput:
			return "", fmt.Errorf("secret value is longer than %d bytes", maxSecretInput)
		case v == "":
			return "", errors.New("no value entered: nothing set")
		}
		return v, nil
	}
}
