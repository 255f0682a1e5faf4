package store

import "remote/api"

// Change is one committed change to a chat or a project: exactly one of
// Chat and Project is set, to the record as saved or, when Deleted, as it
// was before it was removed.
type Change struct {
	Chat    *api.Chat
	Project *api.Project
	Deleted bool
}

// OnChange sets the function called after every committed change to a
// chat or project (nil: none). It runs on the writer's goroutine, outside
// any transaction, and must not block; its argument is its own.
func (s *Store) OnChange(fn func(Change)) {
	if fn == nil {
		s.onChange.Store(nil)
		return
	}
	s.onChange.Store(&fn)
}

func (s *Store) changed(c Change) {
	if fn := s.onChange.Load(); fn != nil {
		(*fn)(c)
	}
}
