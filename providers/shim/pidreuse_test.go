package shim

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"remote/internal/testkit"
)

// pidReuseEnv makes the test binary the pid-reuse scenario, run as pid 1
// of a fresh PID namespace (its value: "release" or "linger").
const pidReuseEnv = "REMOTE_SHIM_PIDREUSE"

// TestAttackPIDReuseKillsNoForeignGroup performs the pid-reuse attack on
// the shim's group kill: the CLI exits, an unrelated process takes the
// CLI's pid as its own process group (ns_last_pid set so that the next pid
// is the CLI's), then the shim is released (or its linger ends) and sends
// SIGKILL to -pgid. The unrelated group must survive. It runs in a fresh
// PID namespace so the pid can be forced without touching the host's.
func TestAttackPIDReuseKillsNoForeignGroup(t *testing.T) {
	if mode := os.Getenv(pidReuseEnv); mode != "" {
		pidReuseScenario(t, mode)
		return
	}
	for _, mode := range []string{"release", "linger"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestAttackPIDReuseKillsNoForeignGroup$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), pidReuseEnv+"="+mode)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
			if os.Getuid() != 0 {
				cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER
				cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
				cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
			}
			out, err := cmd.CombinedOutput()
			if err != nil && strings.Contains(err.Error(), "operation not permitted") {
				testkit.Missing(t, "a new PID namespace: %v", err)
			}
			t.Logf("in the PID namespace:\n%s", out)
			if err != nil || !strings.Contains(string(out), "every foreign group survived") {
				t.Fatalf("the scenario failed (%v): the shim killed a process group it no longer owned", err)
			}
		})
	}
}

// pidReuseScenario is the attack, run as pid 1 of a fresh PID namespace.
func pidReuseScenario(t *testing.T, mode string) {
	if os.Getpid() != 1 {
		t.Fatalf("%s=%s outside a fresh PID namespace (pid %d)", pidReuseEnv, mode, os.Getpid())
	}
	linger := time.Hour
	if mode == "linger" {
		linger = 3 * time.Second
	}
	dir, done := serveDir(t, ServeOptions{Linger: linger, WaitDelay: 200 * time.Millisecond})
	cl := start(t, dir, "exit 0")
	cl.CloseStdin()
	drain(t, cl)
	cli := cl.Info().PID
	if cli <= 1 {
		t.Fatalf("the shim reports CLI pid %d", cli)
	}

	// The attacker: processes that lead their own group, started right
	// after the next pid was set to the CLI's. A thread the runtime starts
	// meanwhile may take the number, so it tries a few times.
	type victim struct {
		cmd    *exec.Cmd
		exited chan error
	}
	var victims []victim
	took := false
	for i := 0; i < 10 && !took; i++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(cli-1)), 0); err != nil {
			t.Fatalf("set ns_last_pid: %v", err)
		}
		v := victim{cmd: exec.Command("sleep", "60"), exited: make(chan error, 1)}
		v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := v.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { v.exited <- v.cmd.Wait() }()
		victims = append(victims, v)
		took = v.cmd.Process.Pid == cli
	}
	t.Logf("CLI pid %d; a foreign process group took it: %v (victims %d)", cli, took, len(victims))

	if mode == "release" {
		if err := cl.Release(); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	if err := done(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	time.Sleep(300 * time.Millisecond) //nolint:forbidigo // an absence that must last: no victim process group is killed meanwhile
	for _, v := range victims {
		select {
		case err := <-v.exited:
			t.Fatalf("process group %d (the CLI's pid was %d) was killed by the shim: %v", v.cmd.Process.Pid, cli, err)
		default:
		}
	}
	if !took {
		// The CLI was reaped after the last group kill: no zombie is left.
		var info unix.Siginfo
		if err := unix.Waitid(unix.P_PID, cli, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil); !errors.Is(err, unix.ECHILD) {
			t.Fatalf("the CLI (pid %d) is still unreaped after the shim ended: waitid = %v", cli, err)
		}
	}
	t.Log("every foreign group survived")
}
