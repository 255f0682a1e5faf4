package main

import (
	"context"
	"testing"

	"remote/client"
	"remote/daemon/daemontest"
)

// TestAuditNamesInstallUser: the audit line of providers install and
// providers select (routes any allowed peer reaches, the handler then
// checks for an administrator) names the acting user, as every route
// acting for a user does; it used to say user="" for them.
func TestAuditNamesInstallUser(t *testing.T) {
	fake := daemontest.New(t, daemontest.Options{})
	ctx := context.Background()
	// kimi is not in the CLI store: refused with 400 after the admin
	// check, before npm runs.
	if r := runCtl(ctx, fake, "", "providers", "install", "kimi"); r.code != 1 {
		t.Fatalf("providers install kimi: %+v", r)
	}
	if r := runCtl(ctx, fake, "", "providers", "select", "kimi@1.0.0"); r.code != 1 {
		t.Fatalf("providers select kimi: %+v", r)
	}
	want := map[string]bool{"POST /v1/providers/{id}/install": false, "POST /v1/providers/{id}/select": false}
	for _, a := range fake.Audit() {
		if _, ok := want[a.Route]; !ok {
			continue
		}
		want[a.Route] = true
		if a.User != client.New("").User() || a.Status != 400 {
			t.Errorf("audit line %+v, want user %q status 400", a, client.New("").User())
		}
	}
	for route, seen := range want {
		if !seen {
			t.Errorf("no audit line for %s", route)
		}
	}
}
