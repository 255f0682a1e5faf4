package projectapi

import (
	"context"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/internal/testkit/fakeanthropic"
	"remote/providers"
	"remote/provisioning"
	"remote/provisioning/lxdconn"
)

// firstEvent creates a new project and a Claude chat in it, sends the
// first prompt and returns the time from the prompt to the first event
// the CLI produced (the container_* notices are the daemon's), then
// deletes the container.
func firstEvent(b *testing.B, e *projectEnv, model *fakeanthropic.Server) time.Duration {
	b.Helper()
	name := uniqueProject("fe")
	p := e.createProjectB(b, api.CreateProjectRequest{Name: name})
	chat := e.newChat(b, "claude", name)
	took := promptToFirstEvent(b, e.testServer, chat.ID, model)
	testkit.Eventually(b, 3*time.Minute, func() bool { return !e.hub.Running(chat.ID) }, "chat %s idle", chat.ID)
	_ = e.lxd.ForceDeleteInstance(context.Background(), p.Container)
	return took
}

// promptToFirstEvent sends the chat's prompt and returns the time to the
// first event the CLI produced (the user event, the checkpoint and the
// container_* notices are the daemon's).
func promptToFirstEvent(b *testing.B, ts *testServer, chatID string, model *fakeanthropic.Server) time.Duration {
	b.Helper()
	model.Push(fakeanthropic.Text("first"))
	start := time.Now()
	if status, body := ts.do("POST", "/v1/chats/"+chatID+"/prompt", "alice", api.PromptRequest{Text: "hi"}); status != http.StatusAccepted {
		b.Fatalf("prompt: %d %s", status, body)
	}
	deadline := start.Add(3 * time.Minute)
	for {
		for _, ev := range ts.events(chatID) {
			if ev.Type == api.EventUser || ev.Type == api.EventCheckpoint || (ev.Type == api.EventSystem && (ev.Subtype == "container_starting" || ev.Subtype == "container_preparing")) {
				continue
			}
			if ev.Type == api.EventError {
				b.Fatalf("run failed: %s", dump(ts.events(chatID)))
			}
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			b.Fatalf("no event from the CLI: %s", dump(ts.events(chatID)))
		}
		time.Sleep(2 * time.Millisecond) //nolint:forbidigo // a benchmark's poll: a fixed 2 ms step is the measurement's resolution
	}
}

// lxcLaunchExec times `lxc launch` of the test image (with the same
// profiles the project containers get) plus `lxc exec -- true`, what a
// user would do by hand to get a shell-ready container.
func lxcLaunchExec(b *testing.B, profile string) time.Duration {
	return lxcLaunchImage(b, testkit.TestImage, profile)
}

// lxcLaunchImage is lxcLaunchExec of image.
func lxcLaunchImage(b *testing.B, image, profile string) time.Duration {
	b.Helper()
	name := testkit.ContainerName("lxcb")
	start := time.Now()
	if out, err := exec.Command("lxc", "launch", image, name, "-p", "default", "-p", profile).CombinedOutput(); err != nil {
		b.Fatalf("lxc launch: %v %s", err, out)
	}
	if out, err := exec.Command("lxc", "exec", name, "--", "true").CombinedOutput(); err != nil {
		b.Fatalf("lxc exec: %v %s", err, out)
	}
	took := time.Since(start)
	_ = exec.Command("lxc", "delete", "--force", name).Run()
	return took
}

// BenchmarkFirstPromptCLIStore: a new project's first Claude prompt to
// the CLI's first event, with the CLI store's read-only device against
// the push path (binary + libraries pushed with install_files, as
// before), and `lxc launch` + `lxc exec -- true` of the same image beside
// them; one iteration measures all three in turn. Metrics: the three
// times in ms, push/store (goal ≥ 10) and store/lxc (goal ≤ 2).
func BenchmarkFirstPromptCLIStore(b *testing.B) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figure: %v", err)
	}
	st := testStore(b, providers.Claude)
	storeEnv, storeModel, profile := claudeEnv(b, st, false, false)
	pushEnv, pushModel, _ := claudeEnv(b, nil, false, true)
	// Warm both paths once (image cache, page cache of the binary).
	firstEvent(b, storeEnv, storeModel)
	firstEvent(b, pushEnv, pushModel)
	lxcLaunchExec(b, profile)
	var store, push, lxc time.Duration
	b.ResetTimer()
	for range b.N {
		store += firstEvent(b, storeEnv, storeModel)
		push += firstEvent(b, pushEnv, pushModel)
		lxc += lxcLaunchExec(b, profile)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(store.Milliseconds())/n, "store-ms")
	b.ReportMetric(float64(push.Milliseconds())/n, "push-ms")
	b.ReportMetric(float64(lxc.Milliseconds())/n, "lxc-ms")
	b.ReportMetric(float64(push)/float64(store), "push/store")
	b.ReportMetric(float64(store)/float64(lxc), "store/lxc")
}

// BenchmarkFirstPromptDevImage: a new project's first Claude prompt (CLI from
// the store) to the CLI's first event on the development image against the
// busybox test image, and `lxc launch` + `lxc exec -- true` of the development
// image beside them; one iteration measures all three in turn
// (docs/benchmarks.md, "A project's first prompt on the development image").
// Metrics: the three times in ms, dev/busybox and dev/lxc.
func BenchmarkFirstPromptDevImage(b *testing.B) {
	if _, err := exec.LookPath("lxc"); err != nil {
		testkit.Missing(b, "lxc client for the side-by-side figure: %v", err)
	}
	testkit.DevImageTarball(b)
	st := testStore(b, providers.Claude)
	devEnv, devModel, profile := claudeEnv(b, st, false, false, func(o *projectEnvOpts) { o.image = testkit.DevImage })
	bbEnv, bbModel, _ := claudeEnv(b, st, false, false)
	firstEvent(b, devEnv, devModel)
	firstEvent(b, bbEnv, bbModel)
	lxcLaunchImage(b, testkit.DevImage, profile)
	var dev, bb, lxc time.Duration
	b.ResetTimer()
	for range b.N {
		dev += firstEvent(b, devEnv, devModel)
		bb += firstEvent(b, bbEnv, bbModel)
		lxc += lxcLaunchImage(b, testkit.DevImage, profile)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(dev.Milliseconds())/n, "dev-ms")
	b.ReportMetric(float64(bb.Milliseconds())/n, "busybox-ms")
	b.ReportMetric(float64(lxc.Milliseconds())/n, "lxc-dev-ms")
	b.ReportMetric(float64(dev)/float64(bb), "dev/busybox")
	b.ReportMetric(float64(dev)/float64(lxc), "dev/lxc")
}

// BenchmarkEnsureCLIStore isolates the step the store replaces: giving a
// new busybox container the Claude Code CLI, with the store's read-only
// devices against the push path (binary + libraries pushed with
// install_files), each on a fresh container created outside the timer.
func BenchmarkEnsureCLIStore(b *testing.B) {
	st := testStore(b, providers.Claude)
	cl := testkit.LXD(b)
	bin := testkit.ClaudeBinary(b)
	conn := lxdconn.NewConn(cl)
	storeSetup := provisioning.DefaultSetups("/root", b.TempDir())[providers.Claude]
	pushSetup := storeSetup
	pushSetup.StoreCLI, pushSetup.InstallFiles = "", []provisioning.File{{Host: bin, Container: "/usr/local/bin/claude", Mode: 0o755}}
	for _, lib := range glibcLibs {
		pushSetup.InstallFiles = append(pushSetup.InstallFiles, provisioning.File{Host: lib, Container: lib, Mode: 0o755})
	}
	storeDeps, _ := provisioning.NewDependencies(provisioning.StepsOptions{LXD: conn, CLIStore: st,
		Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Claude: storeSetup}})
	pushDeps, _ := provisioning.NewDependencies(provisioning.StepsOptions{LXD: conn,
		Providers: map[providers.ProviderID]provisioning.ProviderSetup{providers.Claude: pushSetup}})
	one := func(deps provisioning.Dependencies) time.Duration {
		b.StopTimer()
		name := testkit.NewContainer(b, cl, "cli")
		inst, _, err := cl.Instance(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := deps.CLI.EnsureCLI(context.Background(), provisioning.Container{Name: name, UUID: inst.Config["volatile.uuid"], Config: inst.Config}, providers.Claude); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		_ = cl.ForceDeleteInstance(context.Background(), name)
		b.StartTimer()
		return took
	}
	one(storeDeps)
	one(pushDeps)
	var store, push time.Duration
	b.ResetTimer()
	for range b.N {
		store += one(storeDeps)
		push += one(pushDeps)
	}
	n := float64(b.N)
	b.ReportMetric(float64(store.Milliseconds())/n, "store-ms")
	b.ReportMetric(float64(push.Milliseconds())/n, "push-ms")
	b.ReportMetric(float64(push)/float64(store), "push/store")
}
