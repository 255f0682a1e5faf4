package daemon

import "slices"

// RouteTable lists every route the server answers, its own and those of
// its RouteProviders, as "METHOD pattern" (e.g. "GET /v1/chats/{id}"),
// sorted. docs/api.md documents exactly these (a test checks it).
func (s *Server) RouteTable() []string {
	out := make([]string, 0, len(s.table))
	for _, rt := range s.table {
		out = append(out, rt.Method+" "+rt.Pattern)
	}
	slices.Sort(out)
	return out
}
