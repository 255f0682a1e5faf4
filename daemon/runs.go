package daemon

import (
	"net/http"

	"remote/api"
)

// handleRuns serves GET /v1/runs: the runs in flight of the caller's chats
// (every chat's for an administrator acting as itself, IsAdmin), oldest first, with the shim of each
// (`remotectl runs`).
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) error {
	runs, err := s.svc.Runs()
	if err != nil {
		return err
	}
	user, all := UserFrom(r.Context()), IsAdmin(r)
	out := make([]api.Run, 0, len(runs))
	for _, ri := range runs {
		c, err := s.store.Chat(ri.ChatID)
		if err != nil || (!all && c.Owner != user) {
			continue
		}
		run := api.Run{ChatID: ri.ChatID, RunID: ri.RunID, Provider: ri.Provider, Project: c.Project, Owner: c.Owner,
			Started: ri.Started, Attached: ri.Attached}
		if ri.Shim != nil {
			run.Shim = &api.RunShim{Dir: ri.Shim.Dir, Instance: ri.Shim.Instance}
		}
		out = append(out, run)
	}
	return writeJSON(w, http.StatusOK, out)
}
