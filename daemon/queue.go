package daemon

import (
	"context"
	"net/http"

	"remote/api"
	"remote/daemon/prompt"
	"remote/internal/errdefs"
	"remote/internal/lazyre"
)

// queueIDPattern is what a queued prompt's id looks like (runhub.NewID(6)).
var queueIDPattern = lazyre.New(`^[0-9a-f]{12}$`)

// queuePrompt answers POST /v1/chats/{id}/prompt with "queue": true: 202
// with runId when it started at once, with queueId when it was queued.
func (s *Server) queuePrompt(w http.ResponseWriter, r *http.Request, c api.Chat, in prompt.Input) error {
	runID, qid, err := s.svc.Enqueue(r.Context(), c.ID, in)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, api.PromptResponse{RunID: runID, QueueID: qid})
}

// socketPrompt starts (or, with queue, queues) a chat socket's prompt; it
// returns the queue id when the prompt was queued.
func (s *Server) socketPrompt(ctx context.Context, chatID string, msg api.ClientMessage) (string, error) {
	in := prompt.Input{Text: msg.Text, Mode: msg.Mode, Skills: msg.Skills, Synthetic: msg.Synthetic}
	if msg.Queue {
		_, qid, err := s.svc.Enqueue(ctx, chatID, in)
		return qid, err
	}
	_, err := s.svc.Start(ctx, chatID, in)
	return "", err
}

// ackData is a prompt_accepted's data: the client's id, and the queue id
// of a queued prompt.
func ackData(clientID, qid string) map[string]string {
	d := map[string]string{"clientId": clientID}
	if qid != "" {
		d["queueId"] = qid
	}
	return d
}

// handleQueue answers GET /v1/chats/{id}/queue: the owner's queued
// prompts in the order they will run.
func (s *Server) handleQueue(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	q, err := s.svc.Queue(c.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, q)
}

// handleUnqueue answers DELETE /v1/chats/{id}/queue/{qid}: 204, or 404
// when the chat has no such queued prompt (it may have started).
func (s *Server) handleUnqueue(w http.ResponseWriter, r *http.Request) error {
	c, err := s.ownedChat(r)
	if err != nil {
		return err
	}
	qid := r.PathValue("qid")
	if !queueIDPattern.MatchString(qid) {
		return errdefs.InvalidArgument("queue id %.40q: want 12 lowercase hex characters", qid)
	}
	if err := s.svc.Unqueue(c.ID, qid); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
