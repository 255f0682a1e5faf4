package projectapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"remote/api"
	"remote/daemon"
	"remote/daemon/daemontest"
	"remote/daemon/projectapi"
)

// TestAttackLimitsAsNobody: a local user on the socket (uid nobody, in
// the daemon's allow list) tries to escape the operator's
// [projects.limits] caps and to place a project where the operator did
// not allow: raise or remove limits at create and PATCH, name a pool, an
// image or a cluster target outside the allowlists. Every attempt is a
// 400 naming the field and the cap or the value; nothing is stored and a
// refused PATCH changes nothing. Limits within the caps pass.
func TestAttackLimitsAsNobody(t *testing.T) {
	d := daemontest.New(t, daemontest.Options{LXD: true,
		Configure: func(o *daemon.Options) { o.Access = daemon.Access{UIDs: []int{65534}} },
		Projects: func(o *projectapi.ProjectsOptions) {
			o.Limits = api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 500, Disk: "10GiB"}
			o.Images = []string{"busybox"}
		},
	})
	hc := d.HTTPAs(65534, 65534)
	do := func(method, path string, body any) (int, string) {
		t.Helper()
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://remoted"+path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	refused := func(status int, body, want string) bool {
		var e api.ErrorResponse
		return status == http.StatusBadRequest && json.Unmarshal([]byte(body), &e) == nil && e.Error.Code == "bad_request" && e.Error.Message == want
	}

	// Within the caps: the left-out fields are the caps.
	status, body := do("POST", "/v1/projects", api.CreateProjectRequest{Name: "mine", Limits: &api.ProjectLimits{Memory: "512MiB"}})
	var proj api.Project
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &proj) != nil || proj.Owner != "nobody" ||
		proj.Limits == nil || *proj.Limits != (api.ProjectLimits{CPU: "2", Memory: "512MiB", Processes: 500, Disk: "10GiB"}) {
		t.Fatalf("create within the caps as nobody: %d %s", status, body)
	}

	for i, tc := range []struct {
		req  api.CreateProjectRequest
		want string
	}{
		{api.CreateProjectRequest{Limits: &api.ProjectLimits{Memory: "100%"}}, `limits.memory "100%" is above the cap of "1GiB" ([projects.limits] memory)`},
		{api.CreateProjectRequest{Limits: &api.ProjectLimits{Memory: "1.001GiB"}}, `limits.memory "1.001GiB" is above the cap of "1GiB" ([projects.limits] memory)`},
		{api.CreateProjectRequest{Limits: &api.ProjectLimits{Processes: 4194304}}, `limits.processes "4194304" is above the cap of "500" ([projects.limits] processes)`},
		{api.CreateProjectRequest{Limits: &api.ProjectLimits{CPU: "0-3"}}, `limits.cpu "0-3" is above the cap of "2" ([projects.limits] cpu)`},
		{api.CreateProjectRequest{Limits: &api.ProjectLimits{Disk: "1TB"}}, `limits.disk "1TB" is above the cap of "10GiB" ([projects.limits] disk)`},
		{api.CreateProjectRequest{Pool: "btrfs"}, `pool "btrfs" is not allowed: only the default may be used ([projects] allowed_pools is empty)`},
		{api.CreateProjectRequest{Image: "images:alpine/3.19"}, `image "images:alpine/3.19" is not allowed: want one of busybox ([projects] allowed_images)`},
		{api.CreateProjectRequest{Target: "member2"}, `target "member2" is not allowed: only the default may be used ([projects] allowed_targets is empty)`},
	} {
		tc.req.Name = fmt.Sprintf("escape%d", i)
		if status, body := do("POST", "/v1/projects", tc.req); !refused(status, body, tc.want) {
			t.Errorf("create %+v as nobody: %d %s, want 400 %q", tc.req, status, body, tc.want)
		}
	}

	path := "/v1/projects/mine"
	for _, tc := range []struct {
		l    api.ProjectLimits
		want string
	}{
		{api.ProjectLimits{}, `limits.cpu may not be removed: it is capped at "2" ([projects.limits] cpu)`},
		{api.ProjectLimits{Memory: "100%", Processes: 4194304}, `limits.cpu may not be removed: it is capped at "2" ([projects.limits] cpu)`},
		{api.ProjectLimits{CPU: "2", Processes: 500, Disk: "10GiB"}, `limits.memory may not be removed: it is capped at "1GiB" ([projects.limits] memory)`},
		{api.ProjectLimits{CPU: "2", Memory: "100%", Processes: 500, Disk: "10GiB"}, `limits.memory "100%" is above the cap of "1GiB" ([projects.limits] memory)`},
		{api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 4194304, Disk: "10GiB"}, `limits.processes "4194304" is above the cap of "500" ([projects.limits] processes)`},
		{api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 4194305, Disk: "10GiB"}, `invalid limits.processes 4194305: 0 (no limit) to 4194304`},
		{api.ProjectLimits{CPU: "2", Memory: "1GiB", Disk: "10GiB"}, `limits.processes may not be removed: it is capped at "500" ([projects.limits] processes)`},
		{api.ProjectLimits{CPU: "3", Memory: "1GiB", Processes: 500, Disk: "10GiB"}, `limits.cpu "3" is above the cap of "2" ([projects.limits] cpu)`},
		{api.ProjectLimits{CPU: "2", Memory: "1GiB", Processes: 500, Disk: "10241MiB"}, `limits.disk "10241MiB" is above the cap of "10GiB" ([projects.limits] disk)`},
	} {
		if status, body := do("PATCH", path, api.PatchProjectRequest{Limits: &tc.l}); !refused(status, body, tc.want) {
			t.Errorf("patch %+v as nobody: %d %s, want 400 %q", tc.l, status, body, tc.want)
		}
	}
	status, body = do("GET", "/v1/projects", nil)
	var list []api.Project
	if status != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || list[0].Name != "mine" ||
		*list[0].Limits != (api.ProjectLimits{CPU: "2", Memory: "512MiB", Processes: 500, Disk: "10GiB"}) {
		t.Fatalf("after the refused requests: %d %s, want only mine with its limits unchanged", status, body)
	}

	// Lower limits, and the exact caps, pass.
	for _, l := range []api.ProjectLimits{
		{CPU: "1", Memory: "256MiB", Processes: 100, Disk: "1GiB"},
		{CPU: "0,1", Memory: "1024MiB", Processes: 500, Disk: "10GiB"},
	} {
		status, body = do("PATCH", path, api.PatchProjectRequest{Limits: &l})
		if status != http.StatusOK || json.Unmarshal([]byte(body), &proj) != nil || *proj.Limits != l {
			t.Fatalf("patch within the caps %+v: %d %s", l, status, body)
		}
	}
}
