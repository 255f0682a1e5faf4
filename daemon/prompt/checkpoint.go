package prompt

import (
	"context"
	"encoding/json"
	"sync"

	"remote/api"
	"remote/provisioning/checkpoint"
)

// checkpointTurn returns ctx asking the project preparer for the turn's
// checkpoint (docs/operating.md, "Checkpoints, forks, limits and storage
// pools"): the snapshot is taken once per turn, after the container is prepared
// and before the CLI starts, and stored as a checkpoint event, or
// system/checkpoint_failed with the reason (the turn runs either way). Loose
// chats get ctx unchanged.
func (s *Service) checkpointTurn(ctx context.Context, chat api.Chat, userSeq int64, em *emitter) context.Context {
	if chat.Project == "" {
		return ctx
	}
	var once, treeOnce sync.Once
	return checkpoint.WithTurn(ctx, checkpoint.Turn{Chat: chat.ID, Seq: userSeq, Once: &once,
		// The repository's working tree at the turn's start (docs/operating.md,
		// "A repository per project"), once per turn: system/turn_tree {turn,
		// tree} or {turn, error}.
		Tree: func(tree string, err error) {
			treeOnce.Do(func() {
				d := map[string]any{"turn": userSeq, "tree": tree}
				if err != nil {
					d = map[string]any{"turn": userSeq, "error": err.Error()}
				}
				data, _ := json.Marshal(d)
				em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeTurnTree, Data: data})
			})
		},
		Done: func(project, snapshot string, err error) {
			if err != nil {
				data, _ := json.Marshal(map[string]string{"project": project, "snapshot": snapshot, "reason": err.Error()})
				em.daemonEvent(api.Event{Type: api.EventSystem, Subtype: api.SubtypeCheckpointFailed, Data: data})
				return
			}
			em.daemonEvent(api.Event{Type: api.EventCheckpoint, Snapshot: snapshot, Project: project})
		}})
}
