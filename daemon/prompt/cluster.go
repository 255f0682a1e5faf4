package prompt

import (
	"fmt"
	"time"

	"remote/api"
)

// evacuationNoticeWindow: a chat whose run ended this recently when LXD
// reports the stop is told too (the run's exec ends before LXD's
// instance-shutdown event arrives).
const evacuationNoticeWindow = time.Minute

// ContainerEvacuated tells the chats of project that LXD stopped its
// container on the evacuated cluster member to move it: each chat with a
// run in progress, or one that ended within the last minute, gets a
// system event (subtype container_evacuated). The next prompt resumes the
// provider session in the container where LXD put it.
func (s *Service) ContainerEvacuated(project api.Project, member string) {
	chats, err := s.store.Chats()
	if err != nil {
		s.log.Warn("list chats for an evacuation notice", "project", project.Name, "error", err)
		return
	}
	msg := fmt.Sprintf("LXD stopped this project's container: cluster member %s is being evacuated. LXD "+
		"moves the container to another member (one it cannot migrate stays stopped until the member "+
		"is restored). A run in progress ended; the next prompt resumes the session in the container.", member)
	for _, c := range chats {
		if c.Project != project.Name || (c.ProjectID != "" && project.ID != "" && c.ProjectID != project.ID) {
			continue
		}
		if !s.hub.Running(c.ID) && !c.Running && time.Since(c.LastMessageAt) > evacuationNoticeWindow {
			continue
		}
		data := fmt.Appendf(nil, `{"member":%q}`, member)
		if _, err := s.hub.Append(c.ID, api.Event{Type: api.EventSystem, Subtype: api.SubtypeContainerEvacuated,
			Message: msg, Project: project.Name, Data: data, T: time.Now().UnixMilli()}); err != nil {
			s.log.Warn("append evacuation notice", "chat", c.ID, "error", err)
			continue
		}
		s.hub.Sync(c.ID) // stored beside any run (docs/api.md)
	}
}
