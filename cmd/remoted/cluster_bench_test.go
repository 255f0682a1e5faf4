//go:build cluster

package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"remote/api"
	"remote/internal/testkit"
)

// The cluster benchmarks (docs/benchmarks.md), against the test cluster of
// scripts/lxd-cluster, through a real remoted:
//
//	CI=1 go test -tags cluster -run '^$' -bench BenchmarkCluster -benchtime 3x ./cmd/remoted/
//
// The start-up reconciliation of 60 projects is measured in package
// provisioning (BenchmarkClusterReconcile60 there).

// benchProject creates a project (no provider: no CLI push) placed on
// member, starts it and runs `true` in it; it returns the time taken and
// purges the project afterwards (not timed).
func benchProject(b *testing.B, d *clusterDaemon, member string) time.Duration {
	b.Helper()
	name := testkit.ContainerName("bench")
	autostart := false
	start := time.Now()
	st, body := d.do("POST", "/v1/projects", api.CreateProjectRequest{Name: name, Target: member, Autostart: &autostart, Checkpoints: "off"})
	if st != 201 {
		b.Fatalf("create on %s: %d %s", member, st, body)
	}
	if st, body := d.do("POST", "/v1/projects/"+name+"/start", nil); st/100 != 2 {
		b.Fatalf("start on %s: %d %s", member, st, body)
	}
	st, body = d.do("POST", "/v1/projects/"+name+"/exec", api.ExecRequest{Command: []string{"true"}})
	if st != 200 || !strings.Contains(string(body), `"exitCode":0`) {
		b.Fatalf("exec on %s: %d %s", member, st, body)
	}
	took := time.Since(start)
	if st, body := d.do("DELETE", "/v1/projects/"+name+"?purge=true", nil); st/100 != 2 {
		b.Fatalf("purge: %d %s", st, body)
	}
	return took
}

// BenchmarkClusterCreateExec: project create + start + first exec on the
// member in the first URL (the daemon talks to it) and on another member
// (LXD forwards the requests), alternately in the same run.
func BenchmarkClusterCreateExec(b *testing.B) {
	bed := newClusterBed(b)
	d := startClusterDaemon(b, bed, true)
	var local, remote time.Duration
	for i := 0; i < b.N; i++ {
		local += benchProject(b, d, "rc-member1")
		remote += benchProject(b, d, "rc-member3")
	}
	b.ReportMetric(float64(local.Milliseconds())/float64(b.N), "url-member-ms/op")
	b.ReportMetric(float64(remote.Milliseconds())/float64(b.N), "other-member-ms/op")
	b.ReportMetric(float64(remote)/float64(local), "ratio")
}

// BenchmarkClusterFailover: the LXD of the member in the first URL is
// killed (and held down); timed from the kill to the first exec that
// succeeds through another member. The member is let back (untimed).
func BenchmarkClusterFailover(b *testing.B) {
	bed := newClusterBed(b)
	d := startClusterDaemon(b, bed, true)
	name := testkit.ContainerName("fo")
	autostart := false
	if st, body := d.do("POST", "/v1/projects", api.CreateProjectRequest{Name: name, Target: "rc-member2", Autostart: &autostart, Checkpoints: "off"}); st != 201 {
		b.Fatalf("create: %d %s", st, body)
	}
	defer d.do("DELETE", "/v1/projects/"+name+"?purge=true", nil)
	if st, body := d.do("POST", "/v1/projects/"+name+"/start", nil); st/100 != 2 {
		b.Fatalf("start: %d %s", st, body)
	}
	var total time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// The daemon must be on rc-member1 again: restart it there.
		d.restartOn(b)
		b.StartTimer()
		killed := time.Now()
		out, err := bed.host("exec", "rc-member1", "--", "sh", "-c",
			`touch /run/lxd-hold; for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = lxd ] && kill -9 ${p#/proc/}; done; true`)()
		if err != nil {
			b.Fatalf("kill: %v %s", err, out)
		}
		for {
			st, body := d.do("POST", "/v1/projects/"+name+"/exec", api.ExecRequest{Command: []string{"true"}})
			if st == 200 && strings.Contains(string(body), `"exitCode":0`) {
				break
			}
			if time.Since(killed) > 2*time.Minute {
				b.Fatalf("no successful exec 2 min after the kill: %d %s", st, body)
			}
			time.Sleep(50 * time.Millisecond) //nolint:forbidigo // a benchmark's poll: the step is the measurement's resolution
		}
		total += time.Since(killed)
		b.StopTimer()
		if out, err := bed.host("exec", "rc-member1", "--", "rm", "-f", "/run/lxd-hold")(); err != nil {
			b.Fatalf("release: %v %s", err, out)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !bed.memberOnline("rc-member1") {
			if time.Now().After(deadline) {
				b.Fatal("rc-member1 not back")
			}
			time.Sleep(200 * time.Millisecond) //nolint:forbidigo // a benchmark's poll between measured steps
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "failover-ms/op")
}

// restartOn restarts the daemon (it then talks to the first member that
// answers, rc-member1).
func (d *clusterDaemon) restartOn(b *testing.B) {
	d.cmd.Process.Kill()
	d.cmd.Wait()
	d.start()
	deadline := time.Now().Add(time.Minute)
	for {
		st, body := d.do("GET", "/v1/info", nil)
		var info api.Info
		if st == 200 && json.Unmarshal(body, &info) == nil && info.LXD.Member == "rc-member1" {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("daemon not on rc-member1: %s", body)
		}
		time.Sleep(100 * time.Millisecond) //nolint:forbidigo // a benchmark's poll between measured steps
	}
}
