package runner

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/internal/testkit"
	"remote/providers"
)

// childEnv selects the fake child behaviour when the test binary is
// re-executed as a child process.
const childEnv = "RUNNER_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	testkit.RemoveBinaries() // what testkit.ShimBinary built
	os.Exit(code)
}

// childCommand returns a Command that re-executes the test binary as the
// fake child in the given mode.
func childCommand(t testing.TB, mode string, extraEnv ...string) providers.Command {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{childEnv + "=" + mode, "PATH=" + os.Getenv("PATH")}
	if d := os.Getenv("GOCOVERDIR"); d != "" {
		// a coverage-instrumented child (make mutate) warns into the
		// stderr the tests compare unless it has somewhere to write
		env = append(env, "GOCOVERDIR="+d)
	}
	return providers.Command{
		Path: exe,
		Args: []string{"-test.run=^$"},
		Env:  append(env, extraEnv...),
	}
}

func runChild(mode string) int {
	switch mode {
	case "cat": // stdin → stdout, then a line on stderr
		io.Copy(os.Stdout, os.Stdin)
		fmt.Fprintln(os.Stderr, "cat done")
		return 0
	case "exit":
		code, _ := strconv.Atoi(os.Getenv("CHILD_CODE"))
		fmt.Fprint(os.Stdout, os.Getenv("CHILD_STDOUT"))
		fmt.Fprint(os.Stderr, os.Getenv("CHILD_STDERR"))
		return code
	case "stream": // CHILD_LINES lines of CHILD_LINE, one write each, CHILD_EVERY apart
		n, _ := strconv.Atoi(os.Getenv("CHILD_LINES"))
		every, _ := time.ParseDuration(os.Getenv("CHILD_EVERY"))
		line := []byte(os.Getenv("CHILD_LINE") + "\n")
		for range n {
			os.Stdout.Write(line)
			time.Sleep(every) //nolint:forbidigo // the fake CLI's pace: lines CHILD_EVERY apart
		}
		return 0
	case "env":
		for _, kv := range os.Environ() {
			fmt.Println(kv)
		}
		return 0
	case "pwd":
		wd, _ := os.Getwd()
		fmt.Println(wd)
		return 0
	case "sleep": // announce readiness, then wait to be signalled
		fmt.Println("ready")
		time.Sleep(time.Minute) //nolint:forbidigo // the fake CLI blocks until signalled
		return 0
	case "stubborn": // ignores SIGTERM: only SIGKILL ends it
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Minute) //nolint:forbidigo // the fake CLI blocks until SIGKILLed
		return 0
	case "term-exit": // exits 3 on SIGTERM after printing a line
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("ready")
		<-ch
		fmt.Println("terminated")
		return 3
	case "script": // prints CHILD_SCRIPT lines ("\n"-separated) and CHILD_STDERR, exits CHILD_CODE
		w := bufio.NewWriter(os.Stdout)
		for _, l := range strings.Split(os.Getenv("CHILD_SCRIPT"), "\\n") {
			w.WriteString(l + "\n")
		}
		w.Flush()
		fmt.Fprint(os.Stderr, os.Getenv("CHILD_STDERR"))
		code, _ := strconv.Atoi(os.Getenv("CHILD_CODE"))
		return code
	case "big": // one stdout line of CHILD_SIZE bytes, then "run.completed"
		n, _ := strconv.Atoi(os.Getenv("CHILD_SIZE"))
		w := bufio.NewWriter(os.Stdout)
		for i := 0; i < n; i++ {
			w.WriteByte('x')
		}
		w.WriteString("\nrun.completed\n")
		w.Flush()
		return 0
	case "bigerr": // CHILD_SIZE bytes of stderr in 1 KiB lines, then exit 2
		n, _ := strconv.Atoi(os.Getenv("CHILD_SIZE"))
		w := bufio.NewWriter(os.Stderr)
		line := strings.Repeat("e", 1023) + "\n"
		for i := 0; i < n/1024; i++ {
			w.WriteString(line)
		}
		w.Flush()
		return 2
	case "longerr": // one stderr line of CHILD_SIZE bytes, then exit 2
		n, _ := strconv.Atoi(os.Getenv("CHILD_SIZE"))
		w := bufio.NewWriter(os.Stderr)
		w.WriteString(strings.Repeat("e", n) + "\n")
		w.Flush()
		return 2
	case "stdin-lines": // echoes stdin as one "got" line per input line, then "run.completed"
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			fmt.Printf("got %s\n", sc.Text())
		}
		fmt.Println("run.completed")
		return 0
	case "linger": // prints CHILD_SCRIPT lines, then never exits on its own
		for _, l := range strings.Split(os.Getenv("CHILD_SCRIPT"), "\\n") {
			fmt.Println(l)
		}
		time.Sleep(time.Hour) //nolint:forbidigo // the fake CLI blocks until killed
		return 0
	case "terminal-daemon": // TestAttackRunReachesTheOperatorsTerminal's daemon
		return terminalDaemon()
	}
	fmt.Fprintf(os.Stderr, "unknown child mode %q\n", mode)
	return 99
}
