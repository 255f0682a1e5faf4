package fakeforge

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// post sends body to path with headers and returns the status and the
// decoded answer.
func post(t *testing.T, s *Server, path string, headers map[string]string, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// TestStrict: the stand-in accepts the documented request of each
// dialect and refuses, recording the problem, a request that departs from
// it: a missing header, the wrong token, an unencoded GitLab path, an
// undocumented or missing field.
func TestStrict(t *testing.T) {
	gh := New(t, "github")
	ghHeaders := func() map[string]string {
		return map[string]string{"Authorization": "Bearer " + gh.Token(), "Accept": "application/vnd.github+json",
			"X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json", "User-Agent": "t"}
	}
	ok := `{"title":"t","head":"h","base":"main"}`
	if st, a := post(t, gh, "/repos/o/r/pulls", ghHeaders(), ok); st != 201 || a["html_url"] != gh.srv.URL+"/o/r/pull/1" || a["number"] != 1.0 {
		t.Errorf("documented request: %d %v", st, a)
	}
	h := ghHeaders()
	delete(h, "X-GitHub-Api-Version")
	if st, _ := post(t, gh, "/repos/o/r/pulls", h, ok); st != 400 {
		t.Errorf("no api version: %d, want 400", st)
	}
	h = ghHeaders()
	h["Authorization"] = "token " + gh.Token()
	if st, a := post(t, gh, "/repos/o/r/pulls", h, ok); st != 401 || a["message"] != "Bad credentials" {
		t.Errorf("token scheme: %d %v, want 401 Bad credentials", st, a)
	}
	if st, _ := post(t, gh, "/repos/o/r/pulls", ghHeaders(), `{"title":"t","head":"h","base":"main","labels":["x"]}`); st != 422 {
		t.Errorf("undocumented field: %d, want 422", st)
	}
	if st, _ := post(t, gh, "/repos/o/r/pulls", ghHeaders(), `{"title":"t","head":"h"}`); st != 422 {
		t.Errorf("missing base: %d, want 422", st)
	}
	reqs := gh.Requests()
	if len(reqs) != 5 || reqs[0].Problem != "" || reqs[0].Repo != "o/r" {
		t.Fatalf("requests = %+v", reqs)
	}
	for _, r := range reqs[1:] {
		if r.Problem == "" {
			t.Errorf("request %s %v recorded without a problem", r.Path, r.Fields)
		}
	}

	gl := New(t, "gitlab")
	glHeaders := map[string]string{"PRIVATE-TOKEN": gl.Token(), "Content-Type": "application/json"}
	glOK := `{"title":"t","source_branch":"h","target_branch":"main"}`
	if st, a := post(t, gl, "/api/v4/projects/g%2Fs%2Fr/merge_requests", glHeaders, glOK); st != 201 || a["web_url"] != gl.srv.URL+"/g/s/r/-/merge_requests/1" || a["iid"] != 1.0 {
		t.Errorf("documented request: %d %v", st, a)
	}
	if st, _ := post(t, gl, "/api/v4/projects/g/s/r/merge_requests", glHeaders, glOK); st != 404 {
		t.Errorf("unencoded path: %d, want 404", st)
	}
	gl.FailNext(503, "")
	if st, a := post(t, gl, "/api/v4/projects/g%2Fr/merge_requests", glHeaders, glOK); st != 503 || a["message"] != "Service Unavailable" {
		t.Errorf("FailNext: %d %v", st, a)
	}

	gt := New(t, "gitea")
	gt.SetToken("abc123")
	if st, a := post(t, gt, "/api/v1/repos/o/r/pulls", map[string]string{"Authorization": "token abc123", "Content-Type": "application/json"}, ok); st != 201 || a["html_url"] != gt.srv.URL+"/o/r/pulls/1" {
		t.Errorf("documented request: %d %v", st, a)
	}
	if gt.URL() != gt.srv.URL+"/api/v1" || gl.URL() != gl.srv.URL+"/api/v4" || gh.URL() != gh.srv.URL {
		t.Errorf("URLs %s %s %s", gh.URL(), gl.URL(), gt.URL())
	}
}
