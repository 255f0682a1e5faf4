//go:build cluster

package provisioning

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"remote/api"
	"remote/internal/testkit"
	"remote/lxdexec"
	"remote/provisioning/reconcile"
)

// BenchmarkClusterReconcile60 is the reconciler's start-up pass over 60
// projects, 20 on each member of the test cluster (scripts/lxd-cluster),
// their containers running and their stored status stale (as after a
// daemon restart): one listing of the cluster's instances through
// [lxd] urls, then 60 status and location updates. Beside it, in the same
// run, `lxc list` of the same cluster (what an operator would run).
//
//	CI=1 go test -tags cluster -run '^$' -bench BenchmarkClusterReconcile60 -benchtime 20x ./provisioning/
func BenchmarkClusterReconcile60(b *testing.B) {
	root := testkit.Root()
	var f struct {
		LXD struct {
			URLs       []string `toml:"urls"`
			ClientCert string   `toml:"client_cert"`
			ClientKey  string   `toml:"client_key"`
			ServerCert string   `toml:"server_cert"`
		} `toml:"lxd"`
	}
	if _, err := toml.DecodeFile(filepath.Join(root, "build", "cluster", "remoted.toml"), &f); err != nil || len(f.LXD.URLs) != 3 {
		testkit.Missing(b, "the test cluster (scripts/lxd-cluster up): %v", err)
	}
	ctx := context.Background()
	cl, err := lxdexec.Connect(ctx, lxdexec.Options{URLs: f.LXD.URLs, ClientCert: f.LXD.ClientCert,
		ClientKey: f.LXD.ClientKey, ServerCert: f.LXD.ServerCert})
	if err != nil {
		b.Fatal(err)
	}
	const n = 60
	members := []string{"rc-member1", "rc-member2", "rc-member3"}
	store := newMemStore()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 4)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			name := testkit.ContainerName(fmt.Sprintf("rec%02d", i))
			proj := api.Project{ID: testProjectID(name), Name: name, Container: name, Target: members[i%3]}
			if err := cl.CreateInstance(ctx, lxdexec.InstancesPost{Name: name, Source: lxdexec.InstanceSource{Alias: "busybox"},
				Config: map[string]string{MarkerKey: proj.ID, NameKey: proj.Name}, Target: proj.Target}); err != nil {
				b.Error(err)
				return
			}
			b.Cleanup(func() { _ = cl.ForceDeleteInstance(context.Background(), name) })
			if err := cl.SetState(ctx, name, lxdexec.StateRequest{Action: "start", Timeout: 60}); err != nil {
				b.Error(err)
			}
			mu.Lock()
			store.projects[name] = proj
			mu.Unlock()
		}()
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	prep, err := New(Options{LXD: cl, Projects: store})
	if err != nil {
		b.Fatal(err)
	}
	rec, err := newReconciler(prep, reconcile.Options{Projects: store, Lister: cl})
	if err != nil {
		b.Fatal(err)
	}
	lxdConf := filepath.Join(root, "build", "cluster", "lxc")
	var reconcile, lxc time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for name, p := range store.projects {
			p.Status, p.Location = StatusMissing, ""
			store.projects[name] = p
		}
		b.StartTimer()
		start := time.Now()
		if err := rec.StartAll(ctx); err != nil {
			b.Fatal(err)
		}
		reconcile += time.Since(start)
		b.StopTimer()
		for name, p := range store.projects {
			if p.Status != StatusRunning || p.Location != p.Target {
				b.Fatalf("%s: %s on %q, want running on %s", name, p.Status, p.Location, p.Target)
			}
		}
		cmd := exec.Command("lxc", "list", "--format", "csv", "-c", "nsL")
		cmd.Env = append(cmd.Environ(), "LXD_CONF="+lxdConf)
		start = time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("lxc list: %v %s", err, out)
		}
		lxc += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(float64(reconcile.Microseconds())/1000/float64(b.N), "reconcile-ms/op")
	b.ReportMetric(float64(lxc.Microseconds())/1000/float64(b.N), "lxc-list-ms/op")
	b.ReportMetric(float64(reconcile)/float64(lxc), "ratio")
}
