package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	godbus "github.com/godbus/dbus/v5"

	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
)

var runSeq atomic.Int64

func newRunID(testing.TB) string {
	return fmt.Sprintf("t%d-%d", os.Getpid(), runSeq.Add(1))
}

// hostShim is a ShimConfig for host runs in a temporary runs directory,
// detached (these machines have no systemd as PID 1).
func hostShim(t *testing.T) *ShimConfig {
	t.Helper()
	return &ShimConfig{Binary: testkit.ShimBinary(t), RunsDir: filepath.Join(t.TempDir(), "runs"), Systemd: SystemdNever}
}

// handleSlot is a fresh run slot that keeps the shim handle its launcher
// reports when the run starts.
func handleSlot(t *testing.T) (*providers.RunSlot, *providers.ShimHandle) {
	handle := new(providers.ShimHandle)
	slot := &providers.RunSlot{RunID: newRunID(t), Cursor: providers.NewCursor(false, providers.Pos{}, false),
		Started: func(h providers.ShimHandle) error { *handle = h; return nil }}
	return slot, handle
}

// shimmed marks ctx as a run's main process with a fresh slot, released
// when the test ends.
func shimmed(t *testing.T) func(context.Context) context.Context {
	return func(ctx context.Context) context.Context {
		slot := &providers.RunSlot{RunID: newRunID(t), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
		t.Cleanup(slot.Release)
		return providers.MainProcess(providers.WithRunSlot(ctx, slot))
	}
}

func TestLauncherSuiteHostShim(t *testing.T) {
	t.Parallel()
	launcherSuiteCtx(t, &HostLauncher{Shim: hostShim(t)}, os.Getenv("PATH"), shimmed(t))
}

func TestLauncherSuiteLXDShim(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshim")
	l := (&LXDLauncher{Client: client, Shim: &ShimConfig{Binary: testkit.ShimBinary(t)}}).Container(name)
	launcherSuiteCtx(t, l, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", shimmed(t))
}

// store is a fake daemon store of one run's events: it keeps the events
// with their positions, and drops the ones the cursor says were stored
// before a restart, as the daemon's emitter does.
type store struct {
	mu     sync.Mutex
	events []providers.Event
	last   providers.Pos
	any    bool
	frozen bool // the daemon is stopping: nothing more is stored
}

func (s *store) emit(c *providers.Cursor) func(providers.Event) {
	return func(ev providers.Event) {
		pos, dup := c.Next()
		s.mu.Lock()
		defer s.mu.Unlock()
		if dup || s.frozen {
			return
		}
		s.events = append(s.events, ev)
		s.last, s.any = pos, true
	}
}

// next is the position a re-attached cursor resumes from.
func (s *store) next() providers.Pos {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.any {
		return providers.Pos{Line: -1}
	}
	return providers.Pos{Line: s.last.Line, Index: s.last.Index + 1}
}

func (s *store) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// reattachExactlyOnce streams 40 lines through a shim, drops the daemon's
// connection after the fifth stored event (as a daemon stopping does),
// re-attaches from a new launcher and checks every line became an event
// exactly once. The replayed stdin write must not reach the CLI twice.
func reattachExactlyOnce(t *testing.T, newLauncher func() providers.Launcher, path string) {
	cmd := providers.Command{Path: "sh", Env: []string{"PATH=" + path}, Dir: "/", Args: []string{"-c",
		`read first; echo "text.delta stdin:$first"; i=1; while [ $i -le 40 ]; do echo "text.delta $i"; i=$((i+1)); sleep 0.02; done; echo "run.completed done"; cat`}}
	st := &store{}
	slot, handle := handleSlot(t)
	ctx, cancel := context.WithCancelCause(providers.WithRunSlot(context.Background(), slot))
	emit := st.emit(slot.Cursor)
	stopAt := func(ev providers.Event) {
		emit(ev)
		if st.count() == 5 {
			st.mu.Lock()
			st.frozen = true
			st.mu.Unlock()
			slot.Detach()
			cancel(providers.ErrDetached)
		}
	}
	err := RunProcess(ctx, newLauncher(), cmd, lineParser, stopAt, ProcessOptions{Stdin: "once\n"})
	if err != nil {
		t.Fatalf("first RunProcess: %v", err)
	}
	if handle.Dir == "" {
		t.Fatal("Started was not called")
	}
	if st.count() != 5 {
		t.Fatalf("%d events stored before the restart, want 5", st.count())
	}

	// The next daemon: a new launcher, a replaying cursor.
	st.frozen = false
	slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, st.next(), true)}
	ctx2 := providers.WithRunSlot(context.Background(), slot2)
	err = RunProcess(ctx2, newLauncher(), cmd, lineParser, st.emit(slot2.Cursor), ProcessOptions{Stdin: "twice\n"})
	if err != nil {
		t.Fatalf("re-attached RunProcess: %v", err)
	}
	slot2.Release()
	var got []string
	for _, ev := range st.events {
		got = append(got, ev.Text)
	}
	want := []string{"stdin:once"}
	for i := 1; i <= 40; i++ {
		want = append(want, strconv.Itoa(i))
	}
	want = append(want, "done")
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events after the re-attach:\n got %v\nwant %v", got, want)
	}
}

func TestShimHostReattachExactlyOnce(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	reattachExactlyOnce(t, func() providers.Launcher { return &HostLauncher{Shim: cfg} }, os.Getenv("PATH"))
	testkit.Eventually(t, 30*time.Second, func() error {
		if entries, _ := os.ReadDir(cfg.RunsDir); len(entries) > 0 {
			return fmt.Errorf("left: %v", entries)
		}
		return nil
	}, "run directories removed after the release")
}

func TestShimContainerReattachExactlyOnce(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimre")
	cfg := &ShimConfig{Binary: testkit.ShimBinary(t)}
	reattachExactlyOnce(t, func() providers.Launcher {
		return (&LXDLauncher{Client: client, Shim: cfg}).Container(name)
	}, "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	testkit.Eventually(t, 30*time.Second, func() error {
		if left := containerExec(t, client, name, "ls", "-A", ContainerRunsDir); left != "" {
			return fmt.Errorf("left: %q", left)
		}
		return nil
	}, "run directories removed in the container")

	// Re-attaching to a released run, or in a container that is gone,
	// says the shim is gone and why.
	attach := func(instance string) error {
		slot := &providers.RunSlot{RunID: "gone", Attach: &providers.ShimHandle{Dir: ContainerRunsDir + "/gone", Instance: instance},
			Cursor: providers.NewCursor(true, providers.Pos{}, false)}
		l := (&LXDLauncher{Client: client, Shim: cfg}).Container(instance)
		_, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "true"})
		return err
	}
	if err := attach(name); !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "run directory /var/lib/remote/runs/gone is gone") {
		t.Fatalf("attach to a missing run directory: %v", err)
	}
	if err := attach("t-no-such-container"); !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "container t-no-such-container is gone") {
		t.Fatalf("attach in a missing container: %v", err)
	}
}

// containerExec runs a command in the container directly (no shim).
func containerExec(t *testing.T, client *lxdexec.Client, name string, argv ...string) string {
	t.Helper()
	l := &LXDLauncher{Client: client, Instance: name}
	p, err := l.Start(context.Background(), providers.Command{Path: argv[0], Args: argv[1:]})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	errc := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := p.Stderr().Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		errc <- b.String()
	}()
	var out strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := p.Stdout().Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	<-errc
	_ = p.Wait()
	return strings.TrimSpace(out.String())
}

func TestShimHostReattachToAGoneShim(t *testing.T) {
	t.Parallel()
	l := &HostLauncher{Shim: hostShim(t)}
	dir := filepath.Join(l.Shim.RunsDir, "gone")
	slot := &providers.RunSlot{RunID: "gone", Attach: &providers.ShimHandle{Dir: dir}, Cursor: providers.NewCursor(true, providers.Pos{}, false)}
	_, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "true"})
	if !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "run directory "+dir+" is gone") {
		t.Fatalf("attach to a missing run directory: %v", err)
	}
	// A directory without a live shim.
	os.MkdirAll(dir, 0o700)
	_, err = l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "true"})
	if !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "no shim answers on "+dir+"/shim.sock") {
		t.Fatalf("attach to a dead shim: %v", err)
	}
}

// TestFaultReattachWithoutShimStartsNothing: a daemon without remote-shim
// configured never starts a second CLI for a run that has one: the
// re-attach fails as gone, on the host and in a container, and the
// command is not run.
func TestFaultReattachWithoutShimStartsNothing(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "ran")
	slot := &providers.RunSlot{RunID: "r1", Attach: &providers.ShimHandle{Dir: "/state/runs/r1", Instance: "c1"}, Cursor: providers.NewCursor(true, providers.Pos{}, false)}
	ctx := providers.MainProcess(providers.WithRunSlot(context.Background(), slot))
	for _, l := range []providers.Launcher{&HostLauncher{}, &LXDLauncher{Client: &lxdexec.Client{}, Instance: "c1"}} {
		_, err := l.Start(ctx, providers.Command{Path: "/bin/sh", Args: []string{"-c", "touch " + marker}})
		if !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "remote-shim is not configured") {
			t.Errorf("%T: re-attach without a shim: %v", l, err)
		}
	}
	time.Sleep(100 * time.Millisecond) //nolint:forbidigo // an absence that must last: no second CLI starts meanwhile
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a second CLI was started for a run that already has one")
	}
}

// TestFaultShimKilledEndsTheRun: kill -9 of a run's shim ends the run
// with an error that names the shim being gone, and takes the CLI along.
func TestFaultShimKilledEndsTheRun(t *testing.T) {
	t.Parallel()
	l := &HostLauncher{Shim: hostShim(t)}
	slot, handle := handleSlot(t)
	cmd := providers.Command{Path: "sh", Args: []string{"-c", `echo "text.delta $$"; exec sleep 1000`}, Env: []string{"PATH=" + os.Getenv("PATH")}}
	var cliPID atomic.Int64
	killed := make(chan struct{})
	emit := func(ev providers.Event) {
		if pid, err := strconv.Atoi(ev.Text); err == nil && cliPID.Load() == 0 {
			cliPID.Store(int64(pid))
			b, err := os.ReadFile(filepath.Join(handle.Dir, "pid"))
			if err != nil {
				t.Error(err)
				return
			}
			shimPID, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			syscall.Kill(shimPID, syscall.SIGKILL)
			close(killed)
		}
	}
	err := RunProcess(providers.WithRunSlot(context.Background(), slot), l, cmd, lineParser, emit, ProcessOptions{})
	<-killed
	if !errors.Is(err, providers.ErrShimGone) || !strings.Contains(err.Error(), "the run's supervisor (remote-shim) is gone") {
		t.Fatalf("RunProcess after the shim was killed: %v", err)
	}
	pid := int(cliPID.Load())
	testkit.Eventually(t, 30*time.Second, func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(b), ") Z ")
	}, "the CLI (pid %d) ends with its killed shim", pid)
}

// TestShimNotUsedOffTheMainProcess: probes and other commands of a run
// run directly even with a shim configured.
func TestShimNotUsedOffTheMainProcess(t *testing.T) {
	t.Parallel()
	l := &HostLauncher{Shim: hostShim(t)}
	slot := &providers.RunSlot{RunID: newRunID(t), Cursor: providers.NewCursor(false, providers.Pos{}, false),
		Started: func(providers.ShimHandle) error { t.Error("a non-main command started a shim"); return nil }}
	p, err := l.Start(providers.WithRunSlot(context.Background(), slot), providers.Command{Path: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.(*hostProcess); !ok {
		t.Fatalf("a non-main command ran as %T", p)
	}
	p.Stdin().Close()
	go p.Stderr().Read(make([]byte, 1))
	p.Stdout().Read(make([]byte, 1))
	p.Wait()
}

func TestUnitProperties(t *testing.T) {
	props := unitProperties("/usr/local/bin/remote-shim", "r1", "/var/lib/remote/runs/r1", "", 0)
	got := map[string]string{}
	for _, p := range props {
		got[p.Name] = fmt.Sprint(p.Value.Value())
	}
	want := map[string]string{
		"Description":  "Remote run r1 (remote-shim)",
		"Type":         "notify",
		"ExecStart":    "[{/usr/local/bin/remote-shim [/usr/local/bin/remote-shim serve --dir /var/lib/remote/runs/r1] false}]",
		"CollectMode":  "inactive-or-failed",
		"NotifyAccess": "main",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("properties %v", got)
	}
	// [agent] nice = 10: the run's unit is 10 nicer than the daemon and
	// weighs 11 against remoted.service's 100.
	got = map[string]string{}
	for _, p := range unitProperties("/b", "r1", "/d", "", 10) {
		got[p.Name] = p.Value.Signature().String() + " " + fmt.Sprint(p.Value.Value())
	}
	if w := "i " + strconv.Itoa(min(ownNice(t)+10, 19)); got["Nice"] != w || got["CPUWeight"] != "t 11" {
		t.Errorf("nice properties: Nice %q CPUWeight %q, want %q and \"t 11\"", got["Nice"], got["CPUWeight"], w)
	}
	if n := UnitName("r1"); n != "remote-run-r1.service" {
		t.Errorf("unit name %q", n)
	}
	// Under a daemon unit with PrivateTmp=, the run joins its /tmp.
	got = map[string]string{}
	for _, p := range unitProperties("/b", "r1", "/d", "remoted.service", 0) {
		got[p.Name] = fmt.Sprint(p.Value.Value())
	}
	if got["PrivateTmp"] != "true" || got["JoinsNamespaceOf"] != "[remoted.service]" {
		t.Errorf("joined tmp properties %v", got)
	}
	// The daemon unit's sandbox goes over as read, ReadWritePaths= with
	// the runs directory added.
	rw := inherited("ReadWritePaths", godbus.MakeVariant([]string{"-/var/lib/lxd", "/root"}), "/var/lib/remote/runs")
	if got := fmt.Sprint(rw.Value.Value()); rw.Name != "ReadWritePaths" || got != "[-/var/lib/lxd /root /var/lib/remote/runs]" {
		t.Errorf("inherited ReadWritePaths = %s %s", rw.Name, got)
	}
	if ps := inherited("ProtectSystem", godbus.MakeVariant("strict"), "/r"); ps.Value.Signature().String() != "s" || ps.Value.Value() != "strict" {
		t.Errorf("inherited ProtectSystem = %v", ps.Value)
	}
	af := inherited("RestrictAddressFamilies", godbus.MakeVariant([]interface{}{true, []string{"AF_UNIX", "AF_INET"}}), "/r")
	if sig := af.Value.Signature().String(); sig != "(bas)" || fmt.Sprint(af.Value.Value()) != "{true [AF_UNIX AF_INET]}" {
		t.Errorf("inherited RestrictAddressFamilies = %s %v, want (bas) {true [AF_UNIX AF_INET]}", sig, af.Value.Value())
	}
	for _, want := range []string{"ProtectSystem", "ReadOnlyPaths", "ReadWritePaths", "CapabilityBoundingSet", "NoNewPrivileges", "RestrictAddressFamilies"} {
		if !slices.Contains(sandboxProperties, want) {
			t.Errorf("the run's unit does not inherit %s", want)
		}
	}
	for cg, want := range map[string]string{
		"0::/system.slice/remoted.service\n":                                  "remoted.service",
		"12:pids:/x\n1:name=systemd:/system.slice/remoted.service\n0::/foo\n": "remoted.service",
		"0::/user.slice/user-0.slice/session-3.scope\n":                       "",
		"0::/\n": "",
	} {
		if got := unitFromCgroup(cg); got != want {
			t.Errorf("unitFromCgroup(%q) = %q, want %q", cg, got, want)
		}
	}
}

// TestShimSystemdAlwaysWithoutSystemd: forcing the transient unit where
// systemd's D-Bus does not answer fails the start and says so.
func TestShimSystemdAlwaysWithoutSystemd(t *testing.T) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		t.Skip("systemd runs this host; the systemd helper test covers the unit path")
	}
	cfg := hostShim(t)
	cfg.Systemd = SystemdAlways
	l := &HostLauncher{Shim: cfg}
	slot := &providers.RunSlot{RunID: newRunID(t), Cursor: providers.NewCursor(false, providers.Pos{}, false)}
	_, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "true"})
	if err == nil || !strings.Contains(err.Error(), "no systemd D-Bus to start a transient unit") {
		t.Fatalf("Start = %v", err)
	}
}

// TestAttackCancelInContainerLeavesNothing: a project run's CLI that
// started a background grandchild is cancelled; afterwards no process of
// the run is left in the container. (The plain exec signals only the
// exec'd process, leaving the grandchild running.)
func TestAttackCancelInContainerLeavesNothing(t *testing.T) {
	t.Parallel()
	client := testkit.LXD(t)
	name := testkit.NewContainer(t, client, "rshimkill")
	l := (&LXDLauncher{Client: client, Shim: &ShimConfig{Binary: testkit.ShimBinary(t)}}).Container(name)
	ctx, cancel := context.WithCancel(shimmed(t)(context.Background()))
	defer cancel()
	p, err := l.Start(ctx, providers.Command{Path: "sh", Args: []string{"-c", "sleep 1000 & sleep 1000"}})
	if err != nil {
		t.Fatal(err)
	}
	go p.Stderr().Read(make([]byte, 1))
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := p.Stdout().Read(buf); err != nil {
				return
			}
		}
	}()
	sleeps := func(want int) func() error {
		return func() error {
			if ps := containerExec(t, client, name, "ps"); strings.Count(ps, "sleep 1000") != want {
				return fmt.Errorf("not %d sleeps in:\n%s", want, ps)
			}
			return nil
		}
	}
	testkit.Eventually(t, 30*time.Second, sleeps(2), "the run's two sleeps start")
	cancel()
	if err := p.Wait(); err == nil {
		t.Fatal("a cancelled run exited 0")
	}
	testkit.Eventually(t, 30*time.Second, sleeps(0), "no process of the cancelled run left in the container")
}

// TestShimHostRunsAsTheHostUser: a shimmed run drops to the command's
// uid/gid (HostUserLauncher's) with no supplementary groups, as the direct
// path does.
func TestShimHostRunsAsTheHostUser(t *testing.T) {
	t.Parallel()
	testkit.Short(t, "root")
	if os.Getuid() != 0 {
		testkit.Missing(t, "root (to run as another user)")
	}
	l := HostUserLauncher(&HostLauncher{Shim: hostShim(t)}, HostUser{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"})
	var evs []providers.Event
	ctx := shimmed(t)(context.Background())
	err := RunProcess(ctx, l, providers.Command{Path: "sh", Args: []string{"-c", `echo "run.completed $(id -u):$(id -g):$(id -G):$HOME"`},
		Env: []string{"PATH=" + os.Getenv("PATH")}, Dir: "/"}, lineParser, func(e providers.Event) { evs = append(evs, e) }, ProcessOptions{})
	if err != nil || summary(evs) != "run.completed[65534:65534:65534:/nonexistent];" {
		t.Fatalf("events %s, %v", summary(evs), err)
	}
}

// TestShimInfoOnReattach: a re-attached process reports what the shim
// knows (stdin received and closed, the CLI exited), and replays the
// output from the first byte.
func TestShimInfoOnReattach(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	slot, handle := handleSlot(t)
	p, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)),
		providers.Command{Path: "cat", Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Write([]byte("abc"))
	p.Stdin().Close()
	// Both streams are read to their end, as RunProcess does (a spool
	// run's holder reads its pipes' ends).
	go io.Copy(io.Discard, p.Stderr())
	buf, _ := io.ReadAll(p.Stdout())
	if string(buf) != "abc" || p.Wait() != nil {
		t.Fatalf("first run read %q", buf)
	}
	slot.Detach()

	slot2 := &providers.RunSlot{RunID: slot.RunID, Attach: handle, Cursor: providers.NewCursor(true, providers.Pos{Line: 3}, true)}
	p2, err := (&HostLauncher{Shim: cfg}).Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot2)), providers.Command{})
	if err != nil {
		t.Fatal(err)
	}
	defer slot2.Release()
	info := p2.(ShimProcess).ShimInfo()
	if info.PID <= 0 || info.StdinBytes != 3 || !info.StdinClosed || !info.Exited {
		t.Fatalf("info %+v", info)
	}
	go io.Copy(io.Discard, p2.Stderr())
	buf, _ = io.ReadAll(p2.Stdout())
	if string(buf) != "abc" || p2.Wait() != nil {
		t.Fatalf("replay read %q", buf)
	}
}

// TestReleaseOrphans: at start-up the daemon releases the shims of runs
// whose end it had stored (it died before telling them): a finished,
// unreleased shim is released and its directory goes; a directory no shim
// answers for is removed; a run the daemon still tracks is left alone.
func TestReleaseOrphans(t *testing.T) {
	t.Parallel()
	cfg := hostShim(t)
	l := &HostLauncher{Shim: cfg}
	start := func(id string) {
		slot := &providers.RunSlot{RunID: id, Cursor: providers.NewCursor(false, providers.Pos{}, false)}
		p, err := l.Start(providers.MainProcess(providers.WithRunSlot(context.Background(), slot)), providers.Command{Path: "/bin/echo", Args: []string{"done"}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, p.Stdout())
		io.Copy(io.Discard, p.Stderr())
		if err := p.Wait(); err != nil {
			t.Fatal(err)
		}
		slot.Detach() // the daemon dies before it releases the shim
	}
	start("orphan")
	start("tracked")
	stale := filepath.Join(cfg.RunsDir, "stale")
	os.MkdirAll(stale, 0o700)
	if n := cfg.ReleaseOrphans(context.Background(), func(id string) bool { return id == "tracked" }); n != 2 {
		t.Errorf("ReleaseOrphans cleaned %d, want 2 (orphan, stale)", n)
	}
	testkit.Eventually(t, 30*time.Second, func() error {
		_, e1 := os.Stat(filepath.Join(cfg.RunsDir, "orphan"))
		_, e2 := os.Stat(stale)
		if !os.IsNotExist(e1) || !os.IsNotExist(e2) {
			entries, _ := os.ReadDir(cfg.RunsDir)
			return fmt.Errorf("left: %v", entries)
		}
		return nil
	}, "ReleaseOrphans removes the orphan and the stale directory")
	if _, err := os.Stat(filepath.Join(cfg.RunsDir, "tracked", "stdout")); err != nil {
		t.Fatalf("a tracked run's directory was touched: %v", err)
	}
	cfg.ReleaseOrphans(context.Background(), func(string) bool { return false }) // end the tracked shim too
}

// TestAttackCancelLeavesNoDetachedProcess: a CLI that started a process
// in a session of its own (as Claude Code runs each Bash tool command) is
// cancelled and, its grace spent, killed. The detached process is not in
// the CLI's group, so the group signal misses it; the shim, a child
// subreaper, kills what the cancelled run left behind — on the host and
// in a container. (Without it the process ran on, re-parented to init.)
func TestAttackCancelLeavesNoDetachedProcess(t *testing.T) {
	t.Parallel()
	// The CLI ignores SIGTERM, so the cancel ends with SIGKILL and the CLI
	// cannot clean up after itself.
	check := func(t *testing.T, l providers.Launcher, ps func() string) {
		// A duration of its own marks this run's sleeps (not the shell's
		// command line, nor another run's).
		d := fmt.Sprintf("1000.%d", time.Now().UnixNano()%1_000_000)
		script := "trap '' TERM; setsid sleep " + d + " & sleep " + d + " & wait"
		sleepLine := regexp.MustCompile(`(?m)\ssleep ` + regexp.QuoteMeta(d) + `\s*$`)
		ctx, cancel := context.WithCancel(shimmed(t)(context.Background()))
		defer cancel()
		p, err := l.Start(ctx, providers.Command{Path: "sh", Args: []string{"-c", script}, Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}})
		if err != nil {
			t.Fatal(err)
		}
		go io.Copy(io.Discard, p.Stderr())
		go io.Copy(io.Discard, p.Stdout())
		sleeps := func(want int) func() error {
			return func() error {
				if out := ps(); len(sleepLine.FindAllString(out, -1)) != want {
					return fmt.Errorf("not %d sleeps in:\n%s", want, out)
				}
				return nil
			}
		}
		testkit.Eventually(t, 30*time.Second, sleeps(2), "the run's two sleeps start")
		cancel()
		if err := p.Wait(); err == nil {
			t.Fatal("a cancelled run exited 0")
		}
		testkit.Eventually(t, 30*time.Second, sleeps(0), "no process of the cancelled run left")
	}
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		check(t, &HostLauncher{Shim: hostShim(t), Grace: 200 * time.Millisecond}, func() string {
			out, _ := exec.Command("ps", "-eo", "pid,sid,args").CombinedOutput()
			return string(out)
		})
	})
	t.Run("container", func(t *testing.T) {
		t.Parallel()
		client := testkit.LXD(t)
		name := testkit.NewContainer(t, client, "rshimsid")
		l := (&LXDLauncher{Client: client, KillGrace: 200 * time.Millisecond, Shim: &ShimConfig{Binary: testkit.ShimBinary(t)}}).Container(name)
		check(t, l, func() string { return containerExec(t, client, name, "ps") })
	})
}
