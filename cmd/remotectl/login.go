package main

import (
	"context"
	"fmt"
	"time"

	"remote/api"
)

// loginPoll is how often `providers login` asks for the login's state.
var loginPoll = time.Second

// runProvidersLogin logs a host CLI in through the daemon (which runs the
// CLI's own login as the host user): it prints the sign-in URL (and the
// one-time code for Codex), asks for the code the page shows afterwards
// when the CLI wants one (Claude Code; not echoed, or piped in), and waits
// for the end. Ctrl-C cancels the login.
func runProvidersLogin(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("providers login")
	method := fs.String("method", "", "login `method`: device-code (Codex), oauth (Claude Code); default: the provider's")
	args, err := parseExact(fs, args, "PROVIDER")
	if err != nil {
		return err
	}
	id := args[0]
	l, err := e.Client.StartLogin(ctx, id, *method)
	if err != nil {
		return err
	}
	shown, asked := false, false
	say := e.Stdout // the JSON answer alone on stdout with --json
	if e.JSON {
		say = e.Stderr
	}
	for {
		if !shown && l.URL != "" {
			shown = true
			fmt.Fprintf(say, "Open this URL in a browser and sign in:\n  %s\n", l.URL)
			if l.UserCode != "" {
				fmt.Fprintf(say, "Enter this one-time code there (expires in 15 minutes):\n  %s\n", l.UserCode)
			}
			fmt.Fprintln(say, "Waiting for the sign-in… (Ctrl-C cancels)")
		}
		if l.NeedsCode {
			if asked { // the CLI refused the code: say why, ask again
				fmt.Fprintf(e.Stderr, "%s: %s\n", id, l.Message)
			} else {
				fmt.Fprintln(say, "Then paste the code the page shows.")
			}
			asked = true
			code, err := readSecretValue(ctx, e, "the sign-in code")
			if err == nil {
				var next api.ProviderLogin
				if next, err = e.Client.SubmitLoginCode(ctx, id, l.ID, code); err == nil {
					l = next
				}
			}
			if err != nil {
				_, _ = e.Client.CancelLogin(context.WithoutCancel(ctx), id, l.ID)
				return err
			}
			continue
		}
		if isLoginDone(l) {
			break
		}
		select {
		case <-ctx.Done():
			_, _ = e.Client.CancelLogin(context.WithoutCancel(ctx), id, l.ID)
			return fmt.Errorf("%w: login cancelled", errInterrupted)
		case <-time.After(loginPoll):
		}
		if l, err = e.Client.Login(ctx, id, l.ID); err != nil {
			return err
		}
	}
	if e.JSON {
		return writeJSON(e.Stdout, l)
	}
	if l.State != "succeeded" {
		return fmt.Errorf("%s login %s: %s", id, l.State, l.Message)
	}
	fmt.Fprintf(e.Stdout, "%s: logged in\n", id)
	return nil
}

func isLoginDone(l api.ProviderLogin) bool {
	return l.State == "succeeded" || l.State == "failed" || l.State == "cancelled"
}

// runProvidersLogout runs a host CLI's own logout through the daemon.
func runProvidersLogout(ctx context.Context, e *env, args []string) error {
	args, err := parseExact(e.newFlags("providers logout"), args, "PROVIDER")
	if err != nil {
		return err
	}
	out, err := e.Client.Logout(ctx, args[0])
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, out)
	}
	fmt.Fprintf(e.Stdout, "%s: %s\n", out.Provider, out.Message)
	return nil
}
