package provisioning

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"remote/api"
	"remote/lxdexec"
	"remote/providers"
)

func providersReq(project string) providers.PrepareRequest {
	return providers.PrepareRequest{Provider: providers.Claude, ProjectID: project}
}

// fakeLXD answers Instance with a running, marked container and records
// state changes; other methods are not used by these tests.
type fakeLXD struct {
	LXD
	status string
	calls  *[]string
	// startErr: SetState fails with it and leaves the status as it was.
	startErr error
}

func (f *fakeLXD) Instance(context.Context, string) (*lxdexec.Instance, string, error) {
	return &lxdexec.Instance{Name: "c", Status: f.status, Config: map[string]string{MarkerKey: testProjectID("p"), "volatile.uuid": "u1"}}, "", nil
}

func (f *fakeLXD) SetState(_ context.Context, _ string, req lxdexec.StateRequest) error {
	*f.calls = append(*f.calls, "lxd:"+req.Action)
	if f.startErr != nil {
		return f.startErr
	}
	f.status = "Running"
	return nil
}

// recDeps records the order of provisioning steps.
type recDeps struct {
	calls *[]string
	fail  string
}

func (r recDeps) step(name string) error {
	*r.calls = append(*r.calls, name)
	if name == r.fail {
		return errors.New(name + " failed")
	}
	return nil
}
func (r recDeps) EnsureCLI(context.Context, Container, providers.ProviderID) error {
	return r.step("cli")
}
func (r recDeps) PushCredentials(context.Context, Container, providers.ProviderID) error {
	return r.step("credentials")
}
func (r recDeps) SyncCredentials(context.Context, Container, providers.ProviderID) error {
	return r.step("sync")
}
func (r recDeps) PublishInstructions(context.Context, Container, providers.ProviderID) error {
	return r.step("instructions")
}
func (r recDeps) PublishSkills(context.Context, Container, providers.ProviderID, []string) error {
	return r.step("skills")
}
func (r recDeps) PublishScheduleTools(context.Context, Container, providers.ProviderID) error {
	return r.step("schedule")
}
func (r recDeps) PublishAssets(context.Context, Container, providers.ProviderID) error {
	return r.step("assets")
}
func (r recDeps) ApplyBrowser(context.Context, Container, providers.ProviderID, bool) error {
	return r.step("browser")
}
func (r recDeps) EnableAutostart(context.Context, Container) error { return r.step("autostart") }

func TestPrepareOrder(t *testing.T) {
	tests := []struct {
		name     string
		stored   string
		lxd      string
		ports    []int
		schedule bool
		fail     string
		startErr error
		want     []string
		wantErr  bool
	}{
		{name: "stopped, ports, schedule", stored: StatusStopped, lxd: "Stopped", ports: []int{80}, schedule: true,
			want: []string{"ev:container_starting", "lxd:start", "ev:container_preparing", "cli", "credentials", "instructions", "assets", "skills", "browser", "schedule", "autostart", "secrets"}},
		{name: "running, no ports", stored: StatusRunning, lxd: "Running",
			want: []string{"cli", "credentials", "instructions", "assets", "skills", "browser", "autostart", "secrets"}},
		{name: "stale stored status", stored: StatusRunning, lxd: "Stopped",
			want: []string{"ev:container_starting", "lxd:start", "cli", "credentials", "instructions", "assets", "skills", "browser", "autostart", "secrets"}},
		// Seen in CI under load: LXD's GET said "Error" (a monitor that did
		// not answer in time), its start "already running".
		{name: "start answered already running", stored: StatusRunning, lxd: "Error",
			startErr: fmt.Errorf(`start instance "c": lxd PUT /1.0/instances/c/state: The instance is already running: %w`, lxdexec.ErrAlreadyInState),
			want:     []string{"ev:container_starting", "lxd:start", "cli", "credentials", "instructions", "assets", "skills", "browser", "autostart", "secrets"}},
		{name: "start refused", stored: StatusRunning, lxd: "Stopped", startErr: errors.New("lxd PUT /1.0/instances/c/state: no space left"),
			want: []string{"ev:container_starting", "lxd:start"}, wantErr: true},
		{name: "failed step stops the preparation", stored: StatusRunning, lxd: "Running", fail: "assets",
			want: []string{"cli", "credentials", "instructions", "assets"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			d := recDeps{calls: &calls, fail: tc.fail}
			store := newMemStore(api.Project{Name: "p", Container: "c", Status: tc.stored, Ports: tc.ports})
			prep, err := New(Options{
				LXD: &fakeLXD{status: tc.lxd, calls: &calls, startErr: tc.startErr}, Projects: store,
				Secrets: SecretSourceFunc(func(string) ([]providers.Secret, error) {
					calls = append(calls, "secrets")
					return nil, nil
				}),
				Deps: Dependencies{CLI: d, Credentials: d, Workspace: d, Assets: d, Browser: d, Lifecycle: d},
			})
			if err != nil {
				t.Fatal(err)
			}
			req := providersReq("p")
			req.EnableScheduleTools = tc.schedule
			_, err = prep.Prepare(context.Background(), req, func(ev providers.Event) { calls = append(calls, "ev:"+ev.Subtype) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if !slices.Equal(calls, tc.want) {
				t.Fatalf("order\n got %v\nwant %v", calls, tc.want)
			}
		})
	}
}

// TestPrepareSecretsOfReplacedProject: secrets are stored by project name;
// when the project is deleted and created again (by anyone) while a run
// prepares, the secrets read may be the new project's, so the run gets
// none of them and fails.
func TestPrepareSecretsOfReplacedProject(t *testing.T) {
	var calls []string
	store := newMemStore(api.Project{Name: "p", Container: "c", Status: StatusRunning})
	prep, err := New(Options{
		LXD: &fakeLXD{status: "Running", calls: &calls}, Projects: store,
		Secrets: SecretSourceFunc(func(string) ([]providers.Secret, error) {
			// Replaced between the start and the secrets' read.
			store.mu.Lock()
			store.projects["p"] = api.Project{ID: testProjectID("bob's p"), Name: "p", Container: "c2"}
			store.mu.Unlock()
			return []providers.Secret{{Key: "BOB_TOKEN", Value: "bob's"}}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := providersReq("p")
	req.ProjectUID = testProjectID("p")
	tgt, err := prep.Prepare(context.Background(), req, nil)
	if !errors.Is(err, ErrProjectReplaced) || tgt.Secrets != nil {
		t.Fatalf("target %+v err %v, want no secrets and ErrProjectReplaced", tgt, err)
	}
}
