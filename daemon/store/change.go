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

// OnAppend adds fn to the functions called with the events of every
// committed append to a chat's log (Append, AppendAsync*, UpdateChatAndAppend,
// PushQueued, TakeQueued; not CopyEvents, whose chat is new). Calls come in
// commit order: for one chat, in seq order, each before any later commit
// is written. That is what lets a broadcast of a chat's events never
// deliver seq N+1 before N, whichever goroutine stored them. fn runs while
// other writers wait, so it must be quick, must not block and must not
// call the store; evs is shared, read-only.
func (s *Store) OnAppend(fn func(chatID string, evs []api.Event)) {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	s.onAppend = append(s.onAppend, fn)
}

// appended announces evs, stored in chatID's log by the write that holds
// appendMu.
func (s *Store) appended(chatID string, evs []api.Event) {
	if len(evs) == 0 {
		return
	}
	for _, fn := range s.onAppend {
		fn(chatID, evs)
	}
}
