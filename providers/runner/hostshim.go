package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"remote/internal/procwait"
	"remote/providers"
	"remote/providers/shim"
)

// shimStartTimeout bounds starting (or attaching to) a shim until it
// answers. LXD answers an exec late when busy: over 30 s was seen on a
// loaded 2-core host while other containers were created from a 200 MB
// image on a dir pool. A prompt waits that out rather than fail; its
// caller can still cancel a start.
const shimStartTimeout = 2 * time.Minute

// startShimmed runs cmd under a new shim on the host, or re-attaches to
// the shim slot.Attach names.
func (l *HostLauncher) startShimmed(ctx context.Context, slot *providers.RunSlot, cmd providers.Command) (providers.Process, error) {
	cfg := l.Shim
	grace := l.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	if slot.Attach != nil {
		dir := slot.Attach.Dir
		// Attach even when the run was cancelled meanwhile (a cancel right
		// after a restart): the supervisor then stops the CLI.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shimStartTimeout)
		defer cancel()
		cl, err := l.attachHost(actx, dir)
		if err != nil {
			return nil, err
		}
		return newShimProcess(ctx, cl, slot, grace, func() { cl.Close() }, l.hostRelease(cl, dir)), nil
	}

	if cmd.Path == "" {
		return nil, fmt.Errorf("%w: empty command path", ErrLaunch)
	}
	path, err := lookPath(cmd.Path, cmd.Env)
	if err != nil {
		return nil, err
	}
	if err := checkRunID(slot.RunID); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	dir := filepath.Join(cfg.RunsDir, slot.RunID)
	if err := os.MkdirAll(cfg.RunsDir, 0o700); err != nil {
		return nil, fmt.Errorf("%w %s: create runs directory: %w", ErrLaunch, cmd.Path, err)
	}
	if err := cfg.startHostShim(ctx, slot.RunID, dir); err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	conn, err := shim.Dial(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	if slot.Started != nil {
		if err := slot.Started(providers.ShimHandle{Dir: dir}); err != nil {
			conn.Close() // the shim removes its directory after its start timeout
			return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
		}
	}
	// A spool run: the daemon splices the CLI's pipes into the spool files
	// itself (providers/shim/spool.go).
	cl, err := shim.StartSpool(ctx, conn, dir, shimSpec(cmd, path))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrLaunch, cmd.Path, err)
	}
	return newShimProcess(ctx, cl, slot, grace, func() { cl.Close() }, l.hostRelease(cl, dir)), nil
}

func (l *HostLauncher) attachHost(ctx context.Context, dir string) (*shim.Client, error) {
	conn, err := shim.Dial(ctx, dir)
	if err != nil {
		return nil, goneError(err)
	}
	cl, err := shim.AttachSpool(ctx, conn, dir, 0, 0)
	if errors.Is(err, shim.ErrVersion) {
		// A shim from before spool runs, started before an upgrade.
		if conn, err = shim.Dial(ctx, dir); err != nil {
			return nil, goneError(err)
		}
		cl, err = shim.Attach(ctx, conn, 0, 0)
	}
	if err != nil {
		return nil, goneError(fmt.Errorf("attach to the shim in %s: %w", dir, err))
	}
	return cl, nil
}

// hostRelease returns the release control: over the run's connection,
// or a new one when that one is gone.
func (l *HostLauncher) hostRelease(cl *shim.Client, dir string) func() {
	return func() {
		if err := cl.Release(); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c2, err := l.attachHost(ctx, dir); err == nil {
			_ = c2.Release()
		} else if !errors.Is(err, providers.ErrShimGone) {
			l.Shim.logger().Warn("release remote-shim", "dir", dir, "error", err)
		}
	}
}

// startHostShim starts `remote-shim serve` for dir outside the daemon's
// process tree (and, under systemd, outside its cgroup) and returns once
// its socket listens.
func (c *ShimConfig) startHostShim(ctx context.Context, runID, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, shimStartTimeout)
	defer cancel()
	switch c.Systemd {
	case SystemdNever:
		return c.startDetached(ctx, dir)
	case SystemdAlways:
		return c.startUnit(ctx, runID, dir)
	}
	if _, err := os.Stat("/run/systemd/system"); err != nil {
		return c.startDetached(ctx, dir)
	}
	err := c.startUnit(ctx, runID, dir)
	if errors.Is(err, errNoSystemdBus) {
		c.logger().Warn("systemd's D-Bus did not start the run's shim; starting it detached, inside remoted's cgroup (a restart of remoted.service may stop it)", "error", err)
		return c.startDetached(ctx, dir)
	}
	return err
}

// startDetached starts `remote-shim serve --dir D --ready-fd 3` in a
// session of its own and returns once it listens (it says so on fd 3).
// It is started directly, not through `serve --detach`, which would start
// the binary twice: the shim is the daemon's child until the daemon ends
// (a goroutine reaps it), in its own session, so a signal to the daemon's
// group or terminal does not reach it.
func (c *ShimConfig) startDetached(ctx context.Context, dir string) error {
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start remote-shim: %w", err)
	}
	defer pr.Close()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		pw.Close()
		return fmt.Errorf("start remote-shim: %w", err)
	}
	cmd := exec.Command(c.Binary, "serve", "--dir", dir, "--ready-fd", "3")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = null, null, null
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = startNice(cmd, c.Nice, nil) // no Pdeathsig: its thread may end
	pw.Close()
	null.Close()
	if err != nil {
		return fmt.Errorf("start remote-shim (%s): %w", c.Binary, err)
	}
	if c.Nice != 0 {
		if err := niceSession(cmd.Process.Pid, c.Nice); err != nil {
			c.logger().Warn("the run's session weighs as much as the daemon's (its processes are niced all the same)", "error", err)
		}
	}
	exited := make(chan struct{})
	go func() {
		// The shim outlives this start: wait for its exit parked, not in
		// a waitid that holds a P (procwait), then reap it.
		_, _ = procwait.Exited(cmd.Process.Pid)
		_ = cmd.Wait()
		close(exited)
	}()
	stopRead := context.AfterFunc(ctx, func() { _ = pr.SetReadDeadline(time.Now()) })
	msg, readErr := io.ReadAll(io.LimitReader(pr, 4096))
	stopRead()
	if strings.TrimSpace(string(msg)) == "ok" {
		return nil
	}
	if readErr != nil { // the context ended first
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("start remote-shim (%s): %w", c.Binary, context.Cause(ctx))
	}
	<-exited
	detail := strings.TrimSpace(strings.TrimPrefix(string(msg), "error: "))
	if detail == "" {
		detail = fmt.Sprintf("it ended before it listened (%v)", cmd.ProcessState)
	}
	return fmt.Errorf("start remote-shim (%s): %s", c.Binary, detail)
}

var errNoSystemdBus = errors.New("no systemd D-Bus to start a transient unit")

// UnitName is the transient systemd unit of a host run's shim.
func UnitName(runID string) string { return "remote-run-" + runID + ".service" }

// unitProperties are the transient unit's properties: the shim's serve as
// a notify service, collected once it ended, whatever its result. With
// joinTmp set (the daemon's own unit, which has PrivateTmp=) the run sees
// the daemon's /tmp, as a CLI the daemon ran directly did: a loose chat
// may run in a directory under /tmp.
func unitProperties(binary, runID, dir, joinTmp string, nice int) []sdbus.Property {
	props := []sdbus.Property{
		sdbus.PropDescription("Remote run " + runID + " (remote-shim)"),
		sdbus.PropType("notify"),
		sdbus.PropExecStart([]string{binary, "serve", "--dir", dir}, false),
		{Name: "CollectMode", Value: godbus.MakeVariant("inactive-or-failed")},
		// Only the shim's own notification counts.
		{Name: "NotifyAccess", Value: godbus.MakeVariant("main")},
	}
	if joinTmp != "" {
		props = append(props,
			sdbus.Property{Name: "PrivateTmp", Value: godbus.MakeVariant(true)},
			sdbus.Property{Name: "JoinsNamespaceOf", Value: godbus.MakeVariant([]string{joinTmp})})
	}
	if nice != 0 {
		// systemd starts the unit at its own nice value: Nice= is
		// absolute, so it is the daemon's plus nice. The unit is a cgroup
		// of its own, weighed against remoted.service by CPUWeight= (100
		// each by default), not by its processes' nice values: it gets the
		// weight a process nice makes (1.25 times less per step).
		props = append(props,
			sdbus.Property{Name: "Nice", Value: godbus.MakeVariant(int32(unitNice(nice)))},
			sdbus.Property{Name: "CPUWeight", Value: godbus.MakeVariant(unitCPUWeight(nice))})
	}
	return props
}

// sandboxProperties are the Service properties of the daemon's own unit
// that a run's transient unit inherits, as read from systemd (drop-ins
// included): started outside remoted.service, the CLI must stay as
// confined as when remoted ran it itself — /etc/remote read-only
// (ProtectSystem=strict, ReadOnlyPaths=), the capability bound, the
// address families. PrivateTmp= goes with JoinsNamespaceOf= (joinTmp).
var sandboxProperties = []string{
	"NoNewPrivileges", "ProtectSystem", "ProtectHome", "ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths",
	"PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectControlGroups",
	"ProtectClock", "ProtectHostname", "RestrictSUIDSGID", "LockPersonality", "RestrictRealtime",
	"SystemCallArchitectures", "RestrictAddressFamilies", "CapabilityBoundingSet", "UMask",
	"LimitNOFILE", "LimitNOFILESoft",
}

// inherited is the run unit's value of the daemon unit's property name:
// the same, except that ReadWritePaths= also names runsDir, where the
// shim makes, spools into and removes its run directory (the daemon's
// StateDirectory= holds it, which the run's unit does not have).
func inherited(name string, v godbus.Variant, runsDir string) sdbus.Property {
	switch name {
	case "ReadWritePaths":
		paths, _ := v.Value().([]string)
		v = godbus.MakeVariant(append(append([]string(nil), paths...), runsDir))
	case "RestrictAddressFamilies":
		// (bas) arrives as []interface{}, which godbus would send back as
		// an array: the bus drops a client whose message says otherwise.
		var af addressFamilies
		if fields, ok := v.Value().([]interface{}); ok && len(fields) == 2 {
			af.Allow, _ = fields[0].(bool)
			af.Families, _ = fields[1].([]string)
		}
		v = godbus.MakeVariant(af)
	}
	return sdbus.Property{Name: name, Value: v}
}

// addressFamilies is RestrictAddressFamilies= on the bus: (bas), whether
// the list allows or denies, and the families.
type addressFamilies struct {
	Allow    bool
	Families []string
}

// ownUnit returns the systemd service the daemon runs in, from
// /proc/self/cgroup ("" when it runs in none).
func ownUnit() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	return unitFromCgroup(string(b))
}

func unitFromCgroup(s string) string {
	for _, line := range strings.Split(s, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || (parts[1] != "" && parts[1] != "name=systemd") {
			continue
		}
		if base := filepath.Base(parts[2]); strings.HasSuffix(base, ".service") {
			return base
		}
	}
	return ""
}

// startUnit starts the shim as transient unit remote-run-<runID>.service
// through systemd's D-Bus; the job is done once the shim is READY.
func (c *ShimConfig) startUnit(ctx context.Context, runID, dir string) error {
	conn, err := sdbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errNoSystemdBus, err)
	}
	defer conn.Close()
	// The daemon's private /tmp, if it has one, is the run's too, and so
	// is the rest of its unit's sandbox.
	joinTmp := ""
	var sandbox []sdbus.Property
	if own := ownUnit(); own != "" {
		if p, err := conn.GetUnitTypePropertyContext(ctx, own, "Service", "PrivateTmp"); err == nil {
			if v, ok := p.Value.Value().(bool); ok && v {
				joinTmp = own
			}
		}
		for _, prop := range sandboxProperties {
			// One this systemd does not have is left out.
			if p, err := conn.GetUnitTypePropertyContext(ctx, own, "Service", prop); err == nil {
				sandbox = append(sandbox, inherited(prop, p.Value, filepath.Dir(dir)))
			}
		}
	}
	ch := make(chan string, 1)
	name := UnitName(runID)
	props := append(unitProperties(c.Binary, runID, dir, joinTmp, c.Nice), sandbox...)
	if _, err := conn.StartTransientUnitContext(ctx, name, "fail", props, ch); err != nil {
		// Refused (no permission, an old systemd): the detached way still works.
		return fmt.Errorf("%w: start transient unit %s: %w", errNoSystemdBus, name, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("start transient unit %s: job %s (see journalctl -u %s)", name, res, name)
		}
	case <-ctx.Done():
		return fmt.Errorf("start transient unit %s: %w", name, ctx.Err())
	}
	return nil
}
