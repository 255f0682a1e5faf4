package runner

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

// pidReuseEnv makes the test binary the pid-reuse scenario, run as pid 1
// of a fresh PID namespace.
const pidReuseEnv = "REMOTE_RUNNER_PIDREUSE"

// TestAttackPIDReuseHostLauncher performs the pid-reuse attack on a direct
// host run (no shim): the CLI exits while a process in a session of its
// own still holds its output pipes, an unrelated process takes the CLI's
// pid as its own group (ns_last_pid set to the pid before), and when the
// wait delay ends the launcher sends SIGKILL to -pgid. The unrelated group
// must survive.
func TestAttackPIDReuseHostLauncher(t *testing.T) {
	if os.Getenv(pidReuseEnv) != "" {
		hostPIDReuseScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttackPIDReuseHostLauncher$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), pidReuseEnv+"=1")
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
		t.Fatalf("the scenario failed (%v): the launcher killed a process group it no longer owned", err)
	}
}

func hostPIDReuseScenario(t *testing.T) {
	if os.Getpid() != 1 {
		t.Fatalf("%s outside a fresh PID namespace (pid %d)", pidReuseEnv, os.Getpid())
	}
	l := &HostLauncher{WaitDelay: 2 * time.Second}
	p, err := l.Start(context.Background(), providers.Command{Path: "sh", Args: []string{"-c", "setsid sleep 30 & exit 0"},
		Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	p.Stdin().Close()
	cli := p.(*hostProcess).cmd.Process.Pid
	time.Sleep(300 * time.Millisecond) //nolint:forbidigo // sh has exited; its sleep holds the pipes

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
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	time.Sleep(300 * time.Millisecond) //nolint:forbidigo // an absence that must last: no victim process group is killed meanwhile
	for _, v := range victims {
		select {
		case err := <-v.exited:
			t.Fatalf("process group %d (the CLI's pid was %d) was killed by the launcher: %v", v.cmd.Process.Pid, cli, err)
		default:
		}
	}
	t.Log("every foreign group survived")
}
