package main

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"remote/api"
	"remote/daemon/daemontest"
)

// TestProjectCreateRepo: -repo, -ref and -token-secret reach the daemon as
// the create request's repo {url, ref, tokenSecret}; project show prints
// the URL, the ref and the secret's name (never a value); the daemon's
// refusal of an ssh URL is printed naming repo.url; -ref or -token-secret
// without -repo is a usage error before anything is sent.
func TestProjectCreateRepo(t *testing.T) {
	fake := daemontest.New(t, daemontest.Options{})
	ctx := context.Background()
	const url = "https://git.example.com/team/app.git"
	r := runCtl(ctx, fake, "", "project", "create", "app", "-repo", url, "-ref", "release/1.2", "-token-secret", "GIT_TOKEN", "--json")
	var p api.Project
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &p) != nil {
		t.Fatalf("create: %+v", r)
	}
	if p.Repo == nil || !reflect.DeepEqual(*p.Repo, api.ProjectRepo{URL: url, Ref: "release/1.2", TokenSecret: "GIT_TOKEN"}) {
		t.Fatalf("created project's repo: %+v", p.Repo)
	}
	if r := runCtl(ctx, fake, "token-value-never-shown\n", "project", "secret", "set", "app", "GIT_TOKEN"); r.code != 0 {
		t.Fatalf("secret set: %+v", r)
	}
	r = runCtl(ctx, fake, "", "project", "show", "app")
	var lines []string
	for _, l := range strings.Split(r.stdout, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{"repo: " + url, "repo ref: release/1.2", "repo token secret: GIT_TOKEN"} {
		if r.code != 0 || !slices.Contains(lines, want) {
			t.Errorf("project show lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "token-value-never-shown") {
		t.Errorf("project show printed the token:\n%s", r.stdout)
	}
	// A project without a repository shows no repo lines.
	runCtl(ctx, fake, "", "project", "create", "plain")
	if r := runCtl(ctx, fake, "", "project", "show", "plain"); r.code != 0 || strings.Contains(r.stdout, "repo") {
		t.Errorf("show of a project without a repository: %+v", r)
	}

	r = runCtl(ctx, fake, "", "project", "create", "bad", "-repo", "git@github.com:o/r.git")
	if r.code != 1 || !strings.Contains(r.stderr, "remotectl: bad_request: repo.url: ssh and git:// URLs are not supported") {
		t.Errorf("ssh URL: %+v", r)
	}
	before := len(fake.Audit())
	for _, args := range [][]string{{"-ref", "main"}, {"-token-secret", "GIT_TOKEN"}} {
		r := runCtl(ctx, fake, "", append([]string{"project", "create", "norepo"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "remotectl project: create: -ref and -token-secret need -repo URL\nusage: remotectl project create NAME") {
			t.Errorf("%v without -repo: %+v", args, r)
		}
	}
	if n := len(fake.Audit()); n != before {
		t.Errorf("a usage error reached the daemon: %d requests", n-before)
	}
	if r := runCtl(ctx, fake, "", "project", "create", "-h"); r.code != 0 || !strings.Contains(r.stdout, "-token-secret KEY") || !strings.Contains(r.stdout, "-repo URL") {
		t.Errorf("project create -h: %+v", r)
	}
}

// TestProjectRmPurgeProgress: project rm -purge says on stderr what it is
// doing and when it is done (deleting the container can take a minute);
// stdout stays empty for scripts. A failure ends the line with "failed"
// and the daemon's error; rm without -purge stays silent. With the real
// LXD (the container of a project never started is not there to delete).
func TestProjectRmPurgeProgress(t *testing.T) {
	fake := daemontest.New(t, daemontest.Options{LXD: true})
	ctx := context.Background()
	for _, n := range []string{"gone", "kept"} {
		if r := runCtl(ctx, fake, "", "project", "create", n); r.code != 0 {
			t.Fatalf("create %s: %+v", n, r)
		}
	}
	r := runCtl(ctx, fake, "", "project", "rm", "-purge", "gone")
	if r.code != 0 || r.stdout != "" || !strings.HasPrefix(r.stderr, "removing project gone and its container… done in ") || !strings.HasSuffix(r.stderr, "s\n") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("rm -purge: %+v", r)
	}
	r = runCtl(ctx, fake, "", "project", "rm", "-purge", "gone")
	if r.code != 1 || r.stdout != "" || !strings.HasPrefix(r.stderr, "removing project gone and its container… failed\nremotectl: not_found: ") {
		t.Errorf("rm -purge of a removed project: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "project", "rm", "kept"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("rm without -purge: %+v", r)
	}
}
