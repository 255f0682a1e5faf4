package runner

import (
	"context"
	"fmt"
	"os"
	"testing"

	"remote/internal/testkit"
	"remote/providers"
)

// A damaged copy of the shim in a container is replaced by the next run,
// not used: one that lost its execute bit (LXD 5.0 keeps a file's mode
// when a push overwrites it) or one cut short (a daemon killed in the
// middle of the first push). Before, every later shimmed run in that
// container failed ("remote-shim serve: exit 126") until the next version.
func TestFaultDamagedShimCopyIsReplaced(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimfix")
	cfg := &ShimConfig{Binary: testkit.ShimBinary(t)}
	l := &LXDLauncher{Client: client, Instance: name, Shim: cfg}
	bin, err := l.shimPath()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(cfg.Binary)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d 755", st.Size())
	run := func(t *testing.T) {
		t.Helper()
		p, err := l.Start(shimmed(t)(context.Background()), providers.Command{Path: "echo", Args: []string{"ran"}, Env: []string{"PATH=" + containerPath}})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		p.Stdin().Close()
		out, _, err := drain(t, p)
		if err != nil || out != "ran\n" {
			t.Fatalf("run: %q, %v", out, err)
		}
	}
	run(t) // the first push
	// The copy is replaced by a new file (a running shim keeps the file
	// busy), the way a cut-short push leaves one.
	for _, tc := range []struct {
		name, damage, damaged string
	}{
		{"not executable", "cp $0 $0.x && rm $0 && cp $0.x $0 && rm $0.x && chmod 644 $0", fmt.Sprintf("%d 644", st.Size())},
		{"cut short", "head -c 4096 $0 > $0.x && rm $0 && mv $0.x $0 && chmod 755 $0", "4096 755"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			containerExec(t, client, name, "sh", "-c", tc.damage, bin)
			if got := containerExec(t, client, name, "stat", "-c", "%s %a", bin); got != tc.damaged {
				t.Fatalf("damaged shim copy: %q, want %q", got, tc.damaged)
			}
			run(t)
			if got := containerExec(t, client, name, "stat", "-c", "%s %a", bin); got != want {
				t.Fatalf("shim copy after the run: %q, want %q", got, want)
			}
		})
	}
}
