package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"remote/internal/testkit"
	"remote/providers"
)

// ownNice is the test process's nice value.
func ownNice(t *testing.T) int {
	t.Helper()
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio
}

// niceScript prints, as a run.completed line, the nice value of the
// shell (the launched process) and of a process it starts.
const niceScript = `read -r s < /proc/$$/stat; set -- ${s#*) }; own=${17}; ` +
	`sleep 0.01 & read -r s < /proc/$!/stat; set -- ${s#*) }; kid=${17}; wait; ` +
	`ag=$(cat /proc/$$/autogroup 2>/dev/null); ag=${ag##* }; echo "run.completed $own $kid ${ag:-default}"`

// TestAgentCLIsRunNicer: with [agent] nice = 7, a CLI started directly
// and one started under remote-shim, and what each of them starts, run at
// the daemon's nice value plus 7 — while the API is answered at the
// daemon's own. A shim's session (a scheduling entity of its own under
// the kernel's autogroups) is 7 nicer than the daemon's too.
func TestAgentCLIsRunNicer(t *testing.T) {
	want := strconv.Itoa(min(ownNice(t)+7, 19))
	// A process in init's session (as under a CI runner that never calls
	// setsid) has an empty autogroup file: it is in the kernel's default
	// group, whose nice value counts as 0. A shim's new session gets an
	// autogroup of its own all the same. The script prints "default" for
	// an empty (or missing) file.
	ownGroup, groupWant := "default", "default"
	if b, err := os.ReadFile("/proc/self/autogroup"); err == nil {
		n := 0
		if f := strings.Fields(string(b)); len(f) > 0 {
			ownGroup = f[len(f)-1]
			if n, err = strconv.Atoi(ownGroup); err != nil {
				t.Fatalf("/proc/self/autogroup is %q", b)
			}
		}
		groupWant = strconv.Itoa(min(n+7, 19))
	}
	shim := hostShim(t)
	shim.Nice = 7
	for name, tc := range map[string]struct {
		l   *HostLauncher
		ctx func(context.Context) context.Context
	}{
		"direct":   {&HostLauncher{Nice: 7}, func(ctx context.Context) context.Context { return ctx }},
		"shimmed":  {&HostLauncher{Shim: shim, Nice: 7}, shimmed(t)},
		"shim off": {&HostLauncher{Nice: 0}, func(ctx context.Context) context.Context { return ctx }},
	} {
		t.Run(name, func(t *testing.T) {
			var evs []providers.Event
			err := RunProcess(tc.ctx(context.Background()), tc.l, providers.Command{Path: "sh", Args: []string{"-c", niceScript},
				Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}, lineParser, func(e providers.Event) { evs = append(evs, e) }, ProcessOptions{})
			w, g := want, ownGroup
			if tc.l.Nice == 0 && tc.l.Shim == nil {
				w = strconv.Itoa(ownNice(t))
			}
			if tc.l.Shim != nil {
				g = groupWant
			}
			if got, exp := summary(evs), "run.completed["+w+" "+w+" "+g+"];"; err != nil || got != exp {
				t.Fatalf("events %s, %v; want %s", got, err, exp)
			}
		})
	}
	// The threads that forked the children are gone with them: every
	// thread of the daemon is back at its own value.
	own := strconv.Itoa(ownNice(t))
	testkit.Eventually(t, 10*time.Second, func() error {
		if odd := threadsNotAt(t, own); len(odd) > 0 {
			return fmt.Errorf("threads %v", odd)
		}
		return nil
	}, "every thread of the daemon back at its nice value %s", own)
}

// threadsNotAt lists this process's threads whose nice value is not
// nice, but for the main thread: Go never ends that one, it parks it for
// good (running nothing) when a goroutine locked to it returns.
func threadsNotAt(t *testing.T, nice string) []string {
	t.Helper()
	stats, _ := filepath.Glob("/proc/self/task/*/stat")
	var odd []string
	for _, f := range stats {
		if filepath.Base(filepath.Dir(f)) == strconv.Itoa(os.Getpid()) {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if fields[16] != nice {
			odd = append(odd, f+"="+fields[16])
		}
	}
	return odd
}

// TestNiceChildOutlivesItsStart: a niced direct child has Pdeathsig,
// which the kernel sends when the thread that forked it ends. That
// thread lives as long as the child: no child is killed when its Start
// returns. (Three children: a forking goroutine that lands on the main
// thread would not end it, Go keeps that thread.)
func TestNiceChildOutlivesItsStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waited := make(chan error, 3)
	for range 3 {
		p, err := (&HostLauncher{Nice: 3, Grace: time.Second}).Start(ctx, providers.Command{Path: "sleep", Args: []string{"30"},
			Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"})
		if err != nil {
			t.Fatal(err)
		}
		go p.Stdout().Read(make([]byte, 1))
		go p.Stderr().Read(make([]byte, 1))
		go func() { waited <- p.Wait() }()
	}
	select {
	case err := <-waited:
		t.Fatalf("a child ended on its own within 1 s of its start: %v", err)
	case <-time.After(time.Second):
	}
	cancel()
	for range 3 {
		<-waited
	}
}
