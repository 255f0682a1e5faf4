package provisioning

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/providers"
)

const fakeCLI = "#!/bin/sh\necho fakecli 1.0\n"

// testSetup is a provider setup whose CLI is a shell script pushed from
// the host, so the busybox image needs no network.
func testSetup(t *testing.T, hostHome string) map[providers.ProviderID]ProviderSetup {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakecli")
	if err := os.WriteFile(bin, []byte(fakeCLI), 0o755); err != nil {
		t.Fatal(err)
	}
	return map[providers.ProviderID]ProviderSetup{
		providers.Claude: {
			Check:        []string{"fakecli", "--version"},
			InstallFiles: []File{{Host: bin, Container: "/usr/local/bin/fakecli", Mode: 0o755}},
			Credentials: []Credential{{
				Host: filepath.Join(hostHome, ".claude/.credentials.json"), Container: "/root/.claude/.credentials.json", Sync: true,
			}},
			InstructionsPath: "/root/.claude/CLAUDE.md",
			SkillLinkDir:     "/root/.claude/skills",
			Assets:           []File{{Content: []byte(`{"theme":"dark"}`), Container: "/root/.claude/settings.json", Mode: 0o644}},
			BrowserAssets:    []File{{Content: []byte(`{"mcpServers":{}}`), Container: "/root/.claude/browser-mcp.json", Mode: 0o644}},
		},
		providers.Codex: {
			Credentials: []Credential{{
				Host: filepath.Join(hostHome, ".codex/auth.json"), Container: "/root/.codex/auth.json", Sync: true, RejectAPIKey: true,
			}},
		},
	}
}

type fixture struct {
	cl      *lxdexec.Client
	lxd     *countingLXD
	store   *memStore
	prep    *Preparer
	steps   *Steps
	home    string
	project string
	name    string
}

func newFixture(t *testing.T, secrets SecretSource) *fixture {
	t.Helper()
	cl := testkit.LXD(t)
	f := &fixture{cl: cl, lxd: &countingLXD{Client: cl}, home: t.TempDir(), project: "p1"}
	f.name = newProjectContainer(t, cl, "prep")
	f.store = newMemStore(api.Project{Name: f.project, Container: f.name, Ports: []int{3000}, Status: StatusMissing, CreatedAt: time.Now()})
	instr := t.TempDir()
	writeFile(t, filepath.Join(instr, "10-shared.md"), "Be brief.\n")
	skills := t.TempDir()
	writeFile(t, filepath.Join(skills, "demo", "SKILL.md"), "---\nname: demo\n---\nDemo skill.\n")
	// Symlinked entries, which the host-side listing skips (preparation
	// still succeeds): an instructions file and a skill folder whose
	// targets lie outside the operator's directories.
	elsewhere := t.TempDir()
	writeFile(t, filepath.Join(elsewhere, "planted.md"), "PLANTED-INSTRUCTIONS\n")
	writeFile(t, filepath.Join(elsewhere, "skill", "SKILL.md"), "---\nname: planted\n---\nPLANTED-SKILL\n")
	for link, target := range map[string]string{
		filepath.Join(instr, "20-linked.md"): filepath.Join(elsewhere, "planted.md"),
		filepath.Join(skills, "linked"):      filepath.Join(elsewhere, "skill"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(f.home, ".claude/.credentials.json"), `{"token":"host-1"}`)
	deps, steps := NewDependencies(StepsOptions{
		LXD: f.lxd, Providers: testSetup(t, f.home), InstructionsDir: instr, SkillsDir: skills,
	})
	prep, err := New(Options{LXD: f.lxd, Projects: f.store, Secrets: secrets, Image: testkit.TestImage, Deps: deps,
		CredentialSyncTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.prep, f.steps = prep, steps
	return f
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareRealLXD(t *testing.T) {
	secrets := SecretSourceFunc(func(string) ([]providers.Secret, error) {
		return []providers.Secret{{Key: "API_TOKEN", Value: "s3cr3t-value"}}, nil
	})
	f := newFixture(t, secrets)
	ctx := context.Background()
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project, Skills: []string{"demo"}}

	t.Run("first preparation creates, starts and provisions", func(t *testing.T) {
		var ev collect
		target, err := f.prep.Prepare(ctx, req, ev.emit)
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		if got := ev.subtypes(); !slices.Equal(got, []string{"container_starting", "container_preparing"}) {
			t.Fatalf("events %v, want container_starting then container_preparing", got)
		}
		if target.Container != f.name || target.ProjectID != f.project || len(target.Secrets) != 1 || !target.SharedCredentials {
			t.Fatalf("target %+v", target)
		}
		if f.store.status(f.project) != StatusRunning {
			t.Fatalf("stored status %q", f.store.status(f.project))
		}
		out := sh(t, f.cl, f.name, `fakecli --version; stat -c '%a %u' /root/.claude/.credentials.json; cat /root/.claude/.credentials.json; echo;
cat /root/.claude/CLAUDE.md; readlink /root/.claude/skills/demo; cat /workspace/.agents/skills/demo/SKILL.md | head -2; ls /workspace;
test -e /root/.claude/browser-mcp.json && echo browser-present || echo browser-absent;
ls /workspace/.agents/skills /root/.claude/skills`)
		for _, want := range []string{"fakecli 1.0", "600 0", `{"token":"host-1"}`, "Be brief.", "/workspace/.agents/skills/demo", "name: demo", "browser-absent"} {
			if !strings.Contains(out, want) {
				t.Errorf("container state lacks %q:\n%s", want, out)
			}
		}
		for _, planted := range []string{"PLANTED", "linked"} {
			if strings.Contains(out, planted) {
				t.Errorf("a symlinked instructions file or skill folder was published (%q):\n%s", planted, out)
			}
		}
		inst, _, err := f.cl.Instance(ctx, f.name)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Config["boot.autostart"] != "true" || inst.Config[MarkerKey] != testProjectID(f.project) || inst.Config[NameKey] != f.project {
			t.Errorf("config boot.autostart=%q %s=%q %s=%q", inst.Config["boot.autostart"], MarkerKey, inst.Config[MarkerKey], NameKey, inst.Config[NameKey])
		}
	})

	t.Run("ready container prepares without pushes or execs", func(t *testing.T) {
		pushes, execs := f.lxd.pushes.Load(), f.lxd.execs.Load()
		var ev collect
		if _, err := f.prep.Prepare(ctx, req, ev.emit); err != nil {
			t.Fatal(err)
		}
		if got := ev.subtypes(); !slices.Equal(got, []string{"container_preparing"}) {
			t.Fatalf("events %v, want only container_preparing", got)
		}
		if f.lxd.pushes.Load() != pushes || f.lxd.execs.Load() != execs {
			t.Fatalf("pushes %d→%d execs %d→%d, want none", pushes, f.lxd.pushes.Load(), execs, f.lxd.execs.Load())
		}
	})

	t.Run("browser policy publishes and removes", func(t *testing.T) {
		on := req
		on.EnableBrowser = true
		on.EnableScheduleTools = true
		if _, err := f.prep.Prepare(ctx, on, nil); err != nil {
			t.Fatal(err)
		}
		out := sh(t, f.cl, f.name, `test -e /root/.claude/browser-mcp.json && echo browser-present; head -3 /workspace/.agents/skills/scheduled-tasks/SKILL.md; readlink /root/.claude/skills/scheduled-tasks`)
		if !strings.Contains(out, "browser-present") || !strings.Contains(out, "name: scheduled-tasks") {
			t.Fatalf("browser/schedule not published:\n%s", out)
		}
		if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		if out := sh(t, f.cl, f.name, `test -e /root/.claude/browser-mcp.json && echo browser-present || echo browser-absent`); !strings.Contains(out, "browser-absent") {
			t.Fatalf("browser config left behind: %s", out)
		}
	})

	t.Run("bad skill names are refused", func(t *testing.T) {
		for _, name := range []string{"../etc", "a/b", ".hidden", "missing-skill"} {
			bad := req
			bad.Skills = []string{name}
			if _, err := f.prep.Prepare(ctx, bad, nil); !errors.Is(err, ErrBadSkill) {
				t.Errorf("skill %q: err %v, want ErrBadSkill", name, err)
			}
		}
	})

	t.Run("credential sync back when the container copy is newer", func(t *testing.T) {
		sh(t, f.cl, f.name, `sleep 1; echo '`+claudeCred("refreshed-2")+`' > /root/.claude/.credentials.json`)
		// The host copy is older than the container's.
		hostPath := filepath.Join(f.home, ".claude/.credentials.json")
		old := time.Now().Add(-time.Hour)
		_ = os.Chtimes(hostPath, old, old)
		tgt := providers.Target{ProjectID: f.project, Container: f.name}
		if err := f.prep.SyncCredentials(ctx, tgt, providers.Claude); err != nil {
			t.Fatalf("SyncCredentials: %v", err)
		}
		b, _ := os.ReadFile(hostPath)
		fi, _ := os.Stat(hostPath)
		if !strings.Contains(string(b), "refreshed-2") || fi.Mode().Perm() != 0o600 {
			t.Fatalf("host credentials %q mode %v after sync", b, fi.Mode().Perm())
		}
		// The synced content is not pushed again.
		before := f.lxd.pushCount("/root/.claude/.credentials.json")
		if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		if after := f.lxd.pushCount("/root/.claude/.credentials.json"); after != before {
			t.Fatalf("credentials pushed again after sync (%d→%d)", before, after)
		}
	})

	t.Run("hung sync is abandoned at the timeout", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		hang := pullFunc(func(ctx context.Context, _, _ string) (io.ReadCloser, *lxdexec.FileInfo, error) {
			<-release // ignores ctx, like a wedged transfer
			return nil, nil, errors.New("released")
		})
		f.lxd.pull.Store(&hang)
		defer f.lxd.pull.Store(nil)
		err := f.prep.SyncCredentials(ctx, providers.Target{Container: f.name}, providers.Claude)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want deadline exceeded", err)
		}
	})

	t.Run("deleted outside is recreated with container_starting", func(t *testing.T) {
		if err := f.cl.ForceDeleteInstance(ctx, f.name); err != nil {
			t.Fatal(err)
		}
		var ev collect
		if _, err := f.prep.Prepare(ctx, req, ev.emit); err != nil {
			t.Fatal(err)
		}
		if got := ev.subtypes(); !slices.Equal(got, []string{"container_starting", "container_preparing"}) {
			t.Fatalf("events %v", got)
		}
		out := sh(t, f.cl, f.name, `fakecli --version; cat /root/.claude/CLAUDE.md`)
		if !strings.Contains(out, "fakecli 1.0") || !strings.Contains(out, "Be brief.") {
			t.Fatalf("recreated container not provisioned:\n%s", out)
		}
	})

	t.Run("stopped outside is started again", func(t *testing.T) {
		if err := f.cl.SetState(ctx, f.name, lxdexec.StateRequest{Action: "stop", Force: true}); err != nil {
			t.Fatal(err)
		}
		var ev collect
		if _, err := f.prep.Prepare(ctx, req, ev.emit); err != nil {
			t.Fatal(err)
		}
		if got := ev.subtypes(); !slices.Equal(got, []string{"container_starting", "container_preparing"}) {
			t.Fatalf("events %v", got)
		}
		inst, _, _ := f.cl.Instance(ctx, f.name)
		if inst.Status != "Running" {
			t.Fatalf("status %s", inst.Status)
		}
	})
}

func TestPrepareConcurrentInstallsOnce(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.prep.Prepare(ctx, providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}, nil)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := f.lxd.pushCount("/usr/local/bin/fakecli"); n != 1 {
		t.Fatalf("CLI pushed %d times, want 1", n)
	}
}

func TestPrepareCodexRefusesAPIKeyAuth(t *testing.T) {
	f := newFixture(t, nil)
	writeFile(t, filepath.Join(f.home, ".codex/auth.json"), `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-never-shown"}`)
	_, err := f.prep.Prepare(context.Background(), providers.PrepareRequest{Provider: providers.Codex, ProjectID: f.project}, nil)
	if !errors.Is(err, ErrAPIKeyAuth) {
		t.Fatalf("err %v, want ErrAPIKeyAuth", err)
	}
	if strings.Contains(err.Error(), "sk-never-shown") {
		t.Fatal("error text carries the key")
	}
}

func TestPrepareSecretsBestEffort(t *testing.T) {
	f := newFixture(t, SecretSourceFunc(func(string) ([]providers.Secret, error) {
		return nil, errors.New("store closed")
	}))
	tgt, err := f.prep.Prepare(context.Background(), providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}, nil)
	if err != nil || tgt.Secrets != nil {
		t.Fatalf("target %+v err %v, want no secrets and no error", tgt, err)
	}
}

// TestPrepareReplacedContainer: a container replaced outside the daemon
// (same name, not marked with the project's id) is never adopted, nor is
// one marked as another project's; both are refused naming the container,
// and left untouched. One from before project ids (marked with the name
// only) is claimed when LXD made it after the project was created, and
// refused when it predates the project (left by an earlier project of the
// name, or placed there in advance).
func TestPrepareReplacedContainer(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	replace := func(config map[string]string) {
		t.Helper()
		if err := f.cl.ForceDeleteInstance(ctx, f.name); err != nil {
			t.Fatal(err)
		}
		if err := f.cl.CreateInstance(ctx, lxdexec.InstancesPost{Name: f.name, Source: lxdexec.InstanceSource{Alias: testkit.TestImage}, Config: config}); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(want error, wantMsg string) {
		t.Helper()
		_, err := f.prep.Prepare(ctx, req, nil)
		if !errors.Is(err, want) || !strings.Contains(err.Error(), wantMsg) {
			t.Fatalf("Prepare: %v, want %v naming %q", err, want, wantMsg)
		}
		proj, _ := f.store.Project(f.project)
		if err := f.prep.Stop(ctx, proj); !errors.Is(err, want) {
			t.Fatalf("Stop: %v, want %v", err, want)
		}
		if err := f.prep.Delete(ctx, proj); !errors.Is(err, want) {
			t.Fatalf("Delete (purge): %v, want %v", err, want)
		}
		inst, _, err := f.cl.Instance(ctx, f.name)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != "Stopped" || inst.Config[MarkerKey] == testProjectID(f.project) {
			t.Fatalf("refused container touched: status %s marker %q", inst.Status, inst.Config[MarkerKey])
		}
	}
	id := testProjectID(f.project)
	replace(nil)
	refused(ErrUnmarkedContainer, `container "`+f.name+`" of project "p1": container is not marked as the project's (no user.remote.project-id); `+
		`it is never adopted: remove or rename it, or, if it really is this project's, mark it: lxc config set `+f.name+` user.remote.project-id `+id)
	replace(map[string]string{MarkerKey: testProjectID("other"), NameKey: f.project})
	refused(ErrForeignContainer, `container "`+f.name+`" of project "p1": container belongs to another project (its user.remote.project-id differs); it is left as it is`)

	// From before project ids, made after the project: claimed.
	replace(map[string]string{NameKey: f.project})
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatalf("Prepare on a container from before ids: %v", err)
	}
	if out := sh(t, f.cl, f.name, "fakecli --version; cat /root/.claude/CLAUDE.md"); !strings.Contains(out, "fakecli 1.0") || !strings.Contains(out, "Be brief.") {
		t.Fatalf("claimed container not provisioned:\n%s", out)
	}
	if inst, _, _ := f.cl.Instance(ctx, f.name); inst.Config[MarkerKey] != id {
		t.Fatalf("claimed container's marker %q, want %q", inst.Config[MarkerKey], id)
	}
	// Name-marked but older than the project: refused.
	replace(map[string]string{NameKey: f.project})
	if _, err := f.store.UpdateProject(f.project, func(p *api.Project) error { p.CreatedAt = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	refused(ErrUnmarkedContainer, `container "`+f.name+`" of project "p1": container is not marked`)
}

// TestStartConcurrentWithCreate starts one missing project from several
// callers at once, as the reconciler and the API do after LXD comes back:
// the container is created once and every caller gets it running (LXD
// itself refuses a start while the create operation holds the instance).
func TestStartConcurrentWithCreate(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	proj, err := f.store.Project(f.project)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := range cap(errs) {
		go func() {
			// Staggered, so that later callers find the container
			// created but its create operation still running.
			time.Sleep(time.Duration(i) * 40 * time.Millisecond) //nolint:forbidigo // staggers the callers so later ones find the create under way: the subject
			_, err := f.prep.Start(ctx, proj)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Start: %v", err)
		}
	}
	inst, _, err := f.cl.Instance(ctx, f.name)
	if err != nil || inst.Status != "Running" {
		t.Fatalf("container after concurrent starts: %v %+v", err, inst)
	}
}

// TestPrepareRelinksAfterRestart: a daemon that restarts has forgotten
// which skill links it made; preparing the same container again must
// accept the link already there, and a link left pointing elsewhere is
// replaced (LXD refuses to push a symlink over it: "file exists").
func TestPrepareRelinksAfterRestart(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	f.restart(t, f.lxd)
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatalf("prepare after restart: %v", err)
	}
	sh(t, f.cl, f.name, `ln -sfn /elsewhere /root/.claude/skills/demo`)
	f.restart(t, f.lxd)
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatalf("prepare over a stale link: %v", err)
	}
	if out := strings.TrimSpace(sh(t, f.cl, f.name, `readlink /root/.claude/skills/demo`)); out != "/workspace/.agents/skills/demo" {
		t.Fatalf("link points at %q, want /workspace/.agents/skills/demo", out)
	}

	// A user's own folder at the link's path is never removed: the
	// preparation fails naming the path.
	sh(t, f.cl, f.name, `rm /root/.claude/skills/demo; mkdir /root/.claude/skills/demo; echo mine > /root/.claude/skills/demo/SKILL.md`)
	f.restart(t, f.lxd)
	_, err := f.prep.Prepare(ctx, req, nil)
	if err == nil || !strings.Contains(err.Error(), `"/root/.claude/skills/demo"`) {
		t.Fatalf("err %v, want a failure naming /root/.claude/skills/demo", err)
	}
	if out := strings.TrimSpace(sh(t, f.cl, f.name, `cat /root/.claude/skills/demo/SKILL.md`)); out != "mine" {
		t.Fatalf("user's folder changed: %q", out)
	}
}

// lostLinkRace makes the first symlink push report what LXD says to the
// loser of two concurrent pushes: the link is there (made by the other
// preparation) and the push fails with "file exists".
type lostLinkRace struct {
	*countingLXD
	raced atomic.Bool
}

func (l *lostLinkRace) PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error {
	if opts.Type == lxdexec.FileTypeSymlink && l.raced.CompareAndSwap(false, true) {
		if err := l.countingLXD.PushFile(ctx, instance, path, content, opts); err != nil {
			return err
		}
		return errors.New(`lxd POST /1.0/instances/x/files: 500 sftp: "symlink: file exists" (SSH_FX_FAILURE)`)
	}
	return l.countingLXD.PushFile(ctx, instance, path, content, opts)
}

// TestPrepareLinkRaceLost: CI once failed TestPrepareConcurrentInstallsOnce
// when two preparations pushed the same skill link at once and LXD told
// the second "file exists". The link is right, so the preparation is too.
func TestPrepareLinkRaceLost(t *testing.T) {
	f := newFixture(t, nil)
	lx := &lostLinkRace{countingLXD: f.lxd}
	f.restart(t, lx)
	if _, err := f.prep.Prepare(context.Background(), providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}, nil); err != nil {
		t.Fatalf("prepare after a lost link race: %v", err)
	}
	if !lx.raced.Load() {
		t.Fatal("no symlink was pushed")
	}
}

// restart gives the fixture a new preparer with empty caches, as after a
// daemon restart, driving LXD through lx.
func (f *fixture) restart(t *testing.T, lx LXD) {
	t.Helper()
	deps, steps := NewDependencies(StepsOptions{
		LXD: lx, Providers: testSetup(t, f.home), InstructionsDir: f.steps.opts.InstructionsDir, SkillsDir: f.steps.opts.SkillsDir,
	})
	prep, err := New(Options{LXD: lx, Projects: f.store, Image: testkit.TestImage, Deps: deps, CredentialSyncTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.prep, f.steps = prep, steps
}
