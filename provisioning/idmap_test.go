package provisioning

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"remote/api"
	"remote/lxdexec"
)

// refusingIsolationLXD refuses every container asking for an isolated
// uid range, as LXD does when root's subuid range has no 65536 free, and
// records the config of each create.
type refusingIsolationLXD struct {
	LXD
	creates []map[string]string
}

func (f *refusingIsolationLXD) CreateInstance(_ context.Context, req lxdexec.InstancesPost) error {
	f.creates = append(f.creates, req.Config)
	if req.Config[IsolatedKey] == "true" {
		return errors.New("Failed creating instance record: Failed to get ID map: Not enough uid/gid available for the container")
	}
	return nil
}

func (f *refusingIsolationLXD) SetState(context.Context, string, lxdexec.StateRequest) error {
	return nil
}

// TestIdmapModes: auto asks LXD for an isolated range and, refused, makes
// the container in the shared range with a warning; isolated fails
// instead, naming the setting; shared never asks.
func TestIdmapModes(t *testing.T) {
	proj := api.Project{ID: testProjectID("p"), Name: "p", Container: "remote-p-x"}
	for _, tc := range []struct {
		mode    Idmap
		creates []string // security.idmap.isolated of each create
		err     string
		warn    bool
	}{
		{IdmapAuto, []string{"true", ""}, "", true},
		{IdmapIsolated, []string{"true"}, `with [projects] idmap = "isolated"`, false},
		{IdmapShared, []string{""}, "", false},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			fake := &refusingIsolationLXD{}
			var logs bytes.Buffer
			p, err := New(Options{LXD: fake, Projects: newMemStore(proj), Idmap: tc.mode,
				Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
			if err != nil {
				t.Fatal(err)
			}
			err = p.create(context.Background(), proj, map[string]string{MarkerKey: proj.ID})
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("create: %v, want error %q", err, tc.err)
			}
			var got []string
			for _, c := range fake.creates {
				got = append(got, c[IsolatedKey])
				if c[MarkerKey] != proj.ID {
					t.Errorf("create without the project's marker: %v", c)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.creates, ",") {
				t.Errorf("creates asked isolated %q, want %q", got, tc.creates)
			}
			if warned := strings.Contains(logs.String(), "container created in the shared uid range"); warned != tc.warn {
				t.Errorf("warning logged %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
	if _, err := New(Options{LXD: &refusingIsolationLXD{}, Projects: newMemStore(), Idmap: "private"}); err == nil {
		t.Fatal("idmap \"private\" accepted")
	}
}
