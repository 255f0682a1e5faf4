package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/internal/testkit/fakeopenai"
)

// Runs that outlive the daemon (docs/architecture.md, "Runs that outlive the
// daemon"): a loose Claude Code run (the real CLI against a slow fake model)
// goes on under remote-shim while remoted is killed and started again; the new
// daemon re-attaches and the chat gets every delta exactly once and one
// complete, no error.

const survivePart = "part %d. "

func surviveReply(n int, delay time.Duration) fakeanthropic.Reply {
	var blocks []fakeanthropic.Block
	for i := range n {
		blocks = append(blocks, fakeanthropic.TextBlock(fmt.Sprintf(survivePart, i)))
	}
	return fakeanthropic.Reply{Blocks: blocks, Delay: delay}
}

func surviveText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, survivePart, i)
	}
	return b.String()
}

// surviveDaemon starts remoted with the shim built beside it.
func surviveDaemon(t *testing.T, replies ...fakeanthropic.Reply) (*daemonProc, string) {
	t.Helper()
	testkit.ClaudeBinary(t)
	bins := testkit.Binaries(t, "remoted", "remote-shim")
	fake := fakeanthropic.New(t, replies...)
	dir, err := os.MkdirTemp("", "rdsurvive")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "remoted.sock")
	cfg := strings.Replace(testConfig(t, dir, sock, fake), "[agent]\n", fmt.Sprintf("[agent]\nshim_binary = %q\n", bins[1]), 1)
	d := newDaemon(t, bins[0], cfg, sock)
	d.start()
	t.Cleanup(func() { killRunCLIs(dir) })
	return d, dir
}

func (d *daemonProc) createChat(cwd string) api.Chat {
	d.t.Helper()
	st, body := d.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "claude", Cwd: cwd})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		d.t.Fatalf("create chat: %d %s", st, body)
	}
	return chat
}

func (d *daemonProc) prompt(chatID, text string) {
	d.t.Helper()
	if st, body := d.do("POST", "/v1/chats/"+chatID+"/prompt", api.PromptRequest{Text: text}); st != 202 {
		d.t.Fatalf("prompt: %d %s", st, body)
	}
}

// waitEvents polls the chat's stored events until done says so.
func (d *daemonProc) waitEvents(chatID string, within time.Duration, done func([]api.Event) bool) []api.Event {
	d.t.Helper()
	var evs []api.Event
	if testkit.Poll(within, func() bool { evs = d.events(chatID); return done(evs) }) != nil {
		d.t.Fatalf("chat %s: condition not met in %v; events: %s\nlogs:\n%s", chatID, within, summarize(evs), d.logs)
	}
	return evs
}

func summarize(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "[%d %s%s %q %q] ", ev.Seq, ev.Type, "/"+ev.Subtype, clipText(ev.Text), ev.Message)
	}
	return b.String()
}

func clipText(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func count(evs []api.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func ended(evs []api.Event) bool {
	return count(evs, api.EventComplete)+count(evs, api.EventError) > 0
}

func assistantText(evs []api.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.Type == api.EventAssistantText {
			b.WriteString(ev.Text)
		}
	}
	return b.String()
}

// checkExactlyOnce asserts the run's stored events: gapless seqs, the whole
// reply exactly once, one complete, no error and no restart notice.
func checkExactlyOnce(t *testing.T, evs []api.Event, want string) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq gap: event %d has seq %d", i, ev.Seq)
		}
	}
	if got := assistantText(evs); got != want {
		t.Errorf("assistant text after the restart:\n got %q\nwant %q", got, want)
	}
	if n := count(evs, api.EventComplete); n != 1 {
		t.Errorf("%d complete events, want 1: %s", n, summarize(evs))
	}
	for _, ev := range evs {
		if ev.Type == api.EventError || ev.Subtype == api.SubtypeDaemonRestarted {
			t.Errorf("unexpected %s/%s %q after a restart the run survived", ev.Type, ev.Subtype, ev.Message)
		}
	}
}

func (d *daemonProc) kill9() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatal(err)
	}
	d.cmd.Wait()
}

// runCLIs returns the pids of Claude Code processes working in dir.
func runCLIs(dir string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil || cwd != dir {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "claude") {
			out = append(out, pid)
		}
	}
	return out
}

// killRunCLIs ends what a test's runs left behind: their CLIs and the
// shims whose run directories are under dir.
func killRunCLIs(dir string) {
	for _, pid := range runCLIs(dir) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmd), "remote-shim") && strings.Contains(string(cmd), dir) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func waitNoCLI(t *testing.T, dir string, within time.Duration) {
	t.Helper()
	testkit.Eventually(t, within, func() error {
		if clis := runCLIs(dir); len(clis) > 0 {
			return fmt.Errorf("still running: %v", clis)
		}
		return nil
	}, "the run's CLI ends")
}

// TestRunSurvivesKill9 kills remoted with SIGKILL while a loose Claude
// Code run streams; the restarted daemon re-attaches to the run's shim.
func TestRunSurvivesKill9(t *testing.T) {
	const parts = 30
	d, dir := surviveDaemon(t, surviveReply(parts, 150*time.Millisecond))
	chat := d.createChat(dir)
	d.prompt(chat.ID, "count slowly")
	before := d.waitEvents(chat.ID, 60*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 3 })
	if ended(before) {
		t.Fatalf("the run ended before the kill: %s", summarize(before))
	}
	d.kill9()
	if len(runCLIs(dir)) == 0 {
		t.Fatal("the CLI died with remoted")
	}
	d.start()
	if st, body := d.do("GET", "/v1/runs", nil); st != 200 || !strings.Contains(string(body), chat.ID) || !strings.Contains(string(body), `"shim":{"dir"`) {
		t.Errorf("GET /v1/runs after the restart: %d %s", st, body)
	}
	evs := d.waitEvents(chat.ID, 60*time.Second, ended)
	checkExactlyOnce(t, evs, surviveText(parts))
	waitNoCLI(t, dir, 10*time.Second)
	d.waitRunsEmpty()
}

// TestRunFinishesWhileDaemonDown: the CLI ends its turn while remoted is
// down; the next daemon drains the shim's spool and completes the run.
func TestRunFinishesWhileDaemonDown(t *testing.T) {
	const parts = 12
	d, dir := surviveDaemon(t, surviveReply(parts, 100*time.Millisecond))
	chat := d.createChat(dir)
	d.prompt(chat.ID, "count")
	d.waitEvents(chat.ID, 60*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 1 })
	d.kill9()
	waitNoCLI(t, dir, 60*time.Second) // the turn ends while no daemon runs
	d.start()
	evs := d.waitEvents(chat.ID, 60*time.Second, ended)
	checkExactlyOnce(t, evs, surviveText(parts))
	d.waitRunsEmpty()
}

// TestCancelRightAfterRestart: a cancel sent as soon as the restarted
// daemon answers stops the re-attached run and its CLI.
func TestCancelRightAfterRestart(t *testing.T) {
	d, dir := surviveDaemon(t, surviveReply(200, 200*time.Millisecond))
	chat := d.createChat(dir)
	d.prompt(chat.ID, "count for long")
	d.waitEvents(chat.ID, 60*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 2 })
	d.kill9()
	d.start()
	if st, body := d.do("POST", "/v1/chats/"+chat.ID+"/cancel", nil); st != 202 && st != 200 && st != 204 {
		t.Fatalf("cancel after the restart: %d %s", st, body)
	}
	evs := d.waitEvents(chat.ID, 30*time.Second, ended)
	if n := count(evs, api.EventError); n != 0 {
		t.Errorf("a cancel ended in an error: %s", summarize(evs))
	}
	waitNoCLI(t, dir, 15*time.Second)
	d.waitRunsEmpty()
}

// TestGracefulRestartTenRuns: SIGTERM with ten runs in flight, then a new
// daemon: all ten complete, each exactly once.
func TestGracefulRestartTenRuns(t *testing.T) {
	const runs, parts = 10, 10
	replies := make([]fakeanthropic.Reply, runs)
	for i := range replies {
		replies[i] = surviveReply(parts, 200*time.Millisecond)
	}
	d, dir := surviveDaemon(t, replies...)
	var chats []api.Chat
	for range runs {
		c := d.createChat(dir)
		d.prompt(c.ID, "count")
		chats = append(chats, c)
	}
	for _, c := range chats {
		d.waitEvents(c.ID, 90*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 1 })
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Fatalf("remoted after SIGTERM: %v\n%s", err, d.logs)
	}
	d.start()
	for _, c := range chats {
		evs := d.waitEvents(c.ID, 90*time.Second, ended)
		checkExactlyOnce(t, evs, surviveText(parts))
	}
	d.waitRunsEmpty()
}

// waitRunsEmpty waits until GET /v1/runs lists nothing.
func (d *daemonProc) waitRunsEmpty() {
	d.t.Helper()
	testkit.Eventually(d.t, 15*time.Second, func() error {
		if st, body := d.do("GET", "/v1/runs", nil); st != 200 || strings.TrimSpace(string(body)) != "[]" {
			return fmt.Errorf("runs still listed: %d %s", st, body)
		}
		return nil
	}, "no run listed")
}

// TestApprovalAnsweredAfterRestart: the real Codex app-server waits on an
// approval when remoted is killed; after the restart the pending approval
// is still answerable, and the run completes with the command's result.
func TestApprovalAnsweredAfterRestart(t *testing.T) {
	codexBin := testkit.CodexBinary(t)
	bins := testkit.Binaries(t, "remoted", "remote-shim")
	model, err := fakeopenai.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	dir, err := os.MkdirTemp("", "rdapprove")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	codexHome, home := filepath.Join(dir, "codexhome"), filepath.Join(dir, "home")
	os.MkdirAll(codexHome, 0o700)
	os.MkdirAll(home, 0o700)
	if err := fakeopenai.WriteCodexConfig(codexHome, fakeopenai.CodexConfig{BaseURL: model.URL}); err != nil {
		t.Fatal(err)
	}
	usage := fakeopenai.Usage{InputTokens: 10, OutputTokens: 5}
	model.Enqueue(
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Shell("echo approved-after-restart")}, Usage: usage},
		fakeopenai.Reply{Items: []fakeopenai.Item{fakeopenai.Text("codex-finished-after-restart")}, Usage: usage},
	)
	sock := filepath.Join(dir, "remoted.sock")
	cfg := fmt.Sprintf(`
[daemon]
socket = %q
state_dir = %q
log_level = "debug"

[lxd]
socket = "/nonexistent/lxd/unix.socket"

[agent]
allowed_roots = [%q]
shim_binary = %q

[providers.codex]
binary = %q
env = { CODEX_HOME = %q, HOME = %q, FAKE_OPENAI_API_KEY = "test-key" }
project_env = ["FAKE_OPENAI_API_KEY"]
`, sock, filepath.Join(dir, "state"), dir, bins[1], codexBin, codexHome, home)
	d := newDaemon(t, bins[0], cfg, sock)
	d.start()
	st, body := d.do("POST", "/v1/chats", api.CreateChatRequest{Provider: "codex", Cwd: dir, ApprovalPolicy: "untrusted"})
	var chat api.Chat
	if err := json.Unmarshal(body, &chat); st != 201 || err != nil {
		t.Fatalf("create chat: %d %s", st, body)
	}
	d.prompt(chat.ID, "run the approved command")
	evs := d.waitEvents(chat.ID, 90*time.Second, func(evs []api.Event) bool {
		return count(evs, api.EventInteractionRequest) > 0 || ended(evs)
	})
	if ended(evs) {
		t.Fatalf("the run ended without asking: %s", summarize(evs))
	}
	var id string
	for _, ev := range evs {
		if ev.Type == api.EventInteractionRequest {
			id = ev.InteractionID
		}
	}
	d.kill9()
	d.start()
	testkit.Eventually(t, 30*time.Second, func() error {
		st, body = d.do("POST", "/v1/chats/"+chat.ID+"/interactions", api.InteractionRequest{InteractionID: id, Result: json.RawMessage(`{"decision":"accept"}`)})
		if st >= 300 {
			return fmt.Errorf("%d %s\n%s", st, body, d.logs)
		}
		return nil
	}, "the approval answered after the restart")
	evs = d.waitEvents(chat.ID, 90*time.Second, ended)
	if got := assistantText(evs); got != "codex-finished-after-restart" {
		t.Errorf("assistant text %q, want the reply once: %s", got, summarize(evs))
	}
	if n := count(evs, api.EventInteractionRequest); n != 1 {
		t.Errorf("%d interaction requests, want 1 (replayed?): %s", n, summarize(evs))
	}
	if n := count(evs, api.EventComplete); n != 1 || count(evs, api.EventError) != 0 {
		t.Errorf("run end: %s", summarize(evs))
	}
	d.waitRunsEmpty()
}

// BenchmarkReattach20 measures the time from starting remoted to the first
// live event of each of 20 runs that outlived the previous daemon (killed
// with SIGKILL): the re-attach cost a user waits for after a restart.
//
//	CI=true go test -run '^$' -bench BenchmarkReattach20 -benchtime 3x ./cmd/remoted/
func BenchmarkReattach20(b *testing.B) {
	const runs = 20
	testkit.ClaudeBinary(b)
	bins := testkit.Binaries(b, "remoted", "remote-shim")
	replies := make([]fakeanthropic.Reply, runs)
	for i := range replies {
		replies[i] = surviveReply(600, 100*time.Millisecond) // a minute of output each
	}
	fake := fakeanthropic.New(b, replies...)
	dir, err := os.MkdirTemp("", "rdbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { killRunCLIs(dir); os.RemoveAll(dir) })
	sock := filepath.Join(dir, "remoted.sock")
	cfg := strings.Replace(testConfig(b, dir, sock, fake), "log_level = \"debug\"", "log_level = \"info\"", 1)
	cfg = strings.Replace(cfg, "[agent]\n", fmt.Sprintf("[agent]\nshim_binary = %q\n", bins[1]), 1)
	d := newDaemon(b, bins[0], cfg, sock)
	d.start()
	var chats []string
	for range runs {
		c := d.createChat(dir)
		d.prompt(c.ID, "count")
		chats = append(chats, c.ID)
	}
	for _, id := range chats {
		d.waitEvents(id, 120*time.Second, func(evs []api.Event) bool { return count(evs, api.EventAssistantText) >= 1 })
	}
	var serving, live time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		last := map[string]int64{}
		for _, id := range chats {
			evs := d.events(id)
			if ended(evs) {
				b.Fatalf("run of chat %s ended before the restart: %s", id, summarize(evs))
			}
			last[id] = evs[len(evs)-1].Seq
		}
		d.kill9()
		b.StartTimer()
		t0 := time.Now()
		// Not start(): /v1/info runs the providers' readiness checks,
		// which start the CLIs (slow while twenty of them stream).
		d.startUntil("/v1/runs")
		serving += time.Since(t0)
		done := make(chan error, runs)
		for _, id := range chats {
			go func() { done <- d.firstLiveEvent(id, last[id]) }()
		}
		for range chats {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		live += time.Since(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(serving.Milliseconds())/float64(b.N), "ms-to-serving")
	b.ReportMetric(float64(live.Milliseconds())/float64(b.N), "ms-to-all-live")
	d.kill9()
}

// firstLiveEvent follows the chat's events after seq (NDJSON) until one
// arrives that the previous daemon had not stored.
func (d *daemonProc) firstLiveEvent(chatID string, after int64) error {
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://remoted/v1/chats/%s/events?since=%d&follow=true", chatID, after), nil)
	req.Header.Set(api.HeaderUser, "alice")
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev api.Event
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("follow %s: %w", chatID, err)
		}
		if ev.Seq > after && ev.Type == api.EventAssistantText {
			return nil
		}
	}
}

// TestFaultDirectCLIDiesWithDaemon: without remote-shim a run's CLI is the
// daemon's child; killed with SIGKILL while the CLI waits on a slow model
// (writing nothing, so no broken pipe would end it), the daemon takes the
// CLI along (parent-death signal) instead of leaving it running orphaned.
func TestFaultDirectCLIDiesWithDaemon(t *testing.T) {
	testkit.ClaudeBinary(t)
	fake := fakeanthropic.New(t, fakeanthropic.Slow(60*time.Second, fakeanthropic.Text("too late")))
	dir, err := os.MkdirTemp("", "rdorphan")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killRunCLIs(dir); os.RemoveAll(dir) })
	sock := filepath.Join(dir, "remoted.sock")
	cfg := strings.Replace(testConfig(t, dir, sock, fake), "[agent]\n", "[agent]\nshim_binary = \"/nonexistent/remote-shim\"\n", 1)
	d := newDaemon(t, buildRemoted(t), cfg, sock)
	d.start()
	chat := d.createChat(dir)
	d.prompt(chat.ID, "wait for the model")
	if testkit.Poll(60*time.Second, func() bool { return len(fake.MessageRequests()) > 0 }) != nil {
		t.Fatalf("the CLI never asked the model:\n%s", d.logs)
	}
	if len(runCLIs(dir)) == 0 {
		t.Fatal("no CLI process found for the run")
	}
	d.kill9()
	waitNoCLI(t, dir, 10*time.Second)
}
