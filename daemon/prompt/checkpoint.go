package prompt

import (
	"context"
	"encoding/json"
	"sync"

	"remote/api"
	"remote/provisioning/checkpoint"
)

// checkpointTurn returns ctx asking the project preparer for the turn's
// checkpoint (issue 11): the snapshot is taken once per turn, after the
// container is prepared and before the CLI starts, and stored as a
// checkpoint event, or system/checkpoint_failed with the reason (the turn
// runs either way). Loose chats get ctx unchanged.
func (s *Service) checkpointTurn(ctx context.Context, chat api.Chat, userSeq int64, em *emitter) context.Context {
	if chat.Project == "" {
		return ctx
	}
	var once sync.Once
	return checkpoint.WithTurn(ctx, checkpoint.Turn{Chat: chat.ID, Seq: userSeq, Once: &once,
		Done: func(project, snapshot string, err error) {
			if err != nil {
				data, _ := json.Marshal(map[string]string{"project": project, "snapshot": snapshot, "reason": err.Error()})
				em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeCheckpointFailed, Data: data})
				return
			}
			em.daemonEvent(api.Event{Type: api.EventCheckpoint, Snapshot: snapshot, Project: project})
		}})
}
