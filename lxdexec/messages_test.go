package lxdexec_test

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"remote/internal/testkit"
	"remote/lxdexec"
)

// fixtures reads testdata/messages/lxd-VERSION.txt: Msg name → LXD's
// full message.
func fixtures(t *testing.T, file string) map[string]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, msg, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("%s: %q: want NAME<TAB>MESSAGE", file, line)
		}
		out[name] = msg
	}
	return out
}

// TestMessagesTable: every message of every LXD version's fixture is
// recognised as its own Msg, every Msg has a message in each fixture,
// and none of them is taken for a Msg it is not (the table's parts are
// distinct enough; the two that contain others are named).
func TestMessagesTable(t *testing.T) {
	files, _ := filepath.Glob("testdata/messages/lxd-*.txt")
	if len(files) == 0 {
		t.Fatal("no fixtures in testdata/messages")
	}
	// A message that legitimately matches a second, more general Msg.
	also := map[[2]string]bool{
		{"MsgImageExists", "MsgExists"}:       true, // "same fingerprint already exists"
		{"MsgStreamsTimedOut", "MsgTimedOut"}: true, // asked only of a stop's operation
	}
	for _, file := range files {
		fx := fixtures(t, file)
		for _, m := range lxdexec.Messages() {
			msg, ok := fx[m.String()]
			if !ok {
				t.Errorf("%s: no message for %s", file, m)
				continue
			}
			if !m.In(msg) || !lxdexec.HasMessage(errors.New("wrapped: "+msg), m) {
				t.Errorf("%s: %s does not recognise LXD's %q", file, m, msg)
			}
			for _, o := range lxdexec.Messages() {
				if o != m && o.In(msg) && !also[[2]string{m.String(), o.String()}] {
					t.Errorf("%s: %s's message %q is also taken for %s", file, m, msg, o)
				}
			}
		}
		for name := range fx {
			if !strings.HasPrefix(name, "Msg") {
				t.Errorf("%s: unknown name %q", file, name)
			}
		}
	}
}

// TestMessagesOfThisLXD makes the LXD on the machine answer the messages
// it can be made to answer, and checks each against its version's
// fixture, word for word: an LXD that rewords one fails here, not in a
// project's start.
func TestMessagesOfThisLXD(t *testing.T) {
	c := testkit.LXD(t)
	ctx := testCtx(t)
	srv, err := c.Server(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(srv.ServerVersion, ".", 3)
	file := filepath.Join("testdata", "messages", "lxd-"+strings.Join(parts[:min(2, len(parts))], ".")+".txt")
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("LXD %s has no fixture %s: add one (its messages as this LXD answers them)", srv.ServerVersion, file)
	}
	fx := fixtures(t, file)
	name := testkit.NewContainer(t, c, "msgs")
	check := func(what string, err error, m lxdexec.Msg) {
		t.Helper()
		var lerr *lxdexec.Error
		if !errors.As(err, &lerr) {
			t.Fatalf("%s: %v, want an LXD error", what, err)
		}
		if lerr.Message != fx[m.String()] {
			t.Errorf("%s: LXD %s answers %q; %s says %q", what, srv.ServerVersion, lerr.Message, file, fx[m.String()])
		}
		if !lxdexec.HasMessage(err, m) {
			t.Errorf("%s: %q not recognised as %s", what, lerr.Message, m)
		}
	}
	err = c.CreateInstance(ctx, lxdexec.InstancesPost{Name: name, Source: lxdexec.InstanceSource{Alias: testkit.TestImage}})
	check("create of a name in use", err, lxdexec.MsgExists)
	err = c.SetState(ctx, name, lxdexec.StateRequest{Action: "start"})
	check("start of a running instance", err, lxdexec.MsgAlreadyRunning)
	if err := c.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
		t.Fatal(err)
	}
	err = c.SetState(ctx, name, lxdexec.StateRequest{Action: "stop", Force: true})
	check("stop of a stopped instance", err, lxdexec.MsgAlreadyStopped)
	_, err = c.Exec(ctx, name, lxdexec.ExecRequest{Command: []string{"true"}})
	check("exec in a stopped instance", err, lxdexec.MsgNotRunning)
}
