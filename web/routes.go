package web

import (
	"net/http"
	"slices"
	"strings"

	"remote/api"
)

// route is one entry of remote-web's route tables: a net/http ServeMux
// pattern ("GET /login"; one without a method answers every method, the
// handler deciding) and its handler. The tables are what the two origins
// dispatch on, and what docs/threat-model.md must have a row for.
type route struct {
	Pattern string
	Serve   http.HandlerFunc
}

// pageRoutes is the page origin's table ([web] listen). /v1/ and /ws/
// reach the daemon, whose own route table decides the rest.
func (s *Server) pageRoutes() []route {
	return []route{
		{"GET /{$}", s.serveIndex},
		{"GET /index.html", s.serveIndex},
		{"GET /static/", s.serveStatic},
		{"GET /login", s.serveLogin},
		{"POST /login", s.serveLogin},
		{"POST /logout", s.serveLogout},
		{"GET /preview/{project}/{port}", s.servePreviewStart},
		{"GET " + previewConfirmPath, s.servePreviewConfirm},
		{routineHookPrefix + "{id}", s.serveRoutine},
		// Any method: serveHook answers 405 to all but POST (a method
		// in the pattern would clash with the routine hook's).
		{"/hooks/{forge}/{project}", s.serveHook},
		{"/v1/", s.serveAPI},
		{"/ws/", s.serveAPI},
	}
}

// previewRoutes is the preview origin's table ([web] preview_listen):
// the entry's two steps, and the previewed app behind everything else.
func (s *Server) previewRoutes() []route {
	return []route{
		{"GET " + previewEnterPath, s.previewEnter},
		{"GET " + previewSessionPath, s.previewSession},
		{"/", s.servePreviewApp},
	}
}

// RouteTable lists the page origin's routes as their ServeMux patterns
// (e.g. "POST /login"; "/v1/" answers every method), sorted.
func (s *Server) RouteTable() []string { return patterns(s.pageRoutes()) }

// PreviewRouteTable lists the preview origin's routes, as RouteTable.
func (s *Server) PreviewRouteTable() []string { return patterns(s.previewRoutes()) }

func patterns(routes []route) []string {
	out := make([]string, 0, len(routes))
	for _, rt := range routes {
		out = append(out, rt.Pattern)
	}
	slices.Sort(out)
	return out
}

// newRouter builds a ServeMux from routes. Every miss answers with the
// JSON error envelope: 405 with Allow for a path served for other methods
// (a GET route also answers HEAD), else 404 "no such page" (also for a
// subtree's root without its slash, "/v1", which ServeMux would redirect).
func newRouter(routes []route) *http.ServeMux {
	mux := http.NewServeMux()
	notFound := func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "no such page: "+r.URL.Path)
	}
	allow := map[string][]string{} // path → methods, for routes with a method
	anyMethod := map[string]bool{}
	var subtrees []string
	for _, rt := range routes {
		mux.HandleFunc(rt.Pattern, rt.Serve)
		method, p, ok := strings.Cut(rt.Pattern, " ")
		if !ok {
			method, p = "", rt.Pattern
		}
		if p != "/" && strings.HasSuffix(p, "/") {
			subtrees = append(subtrees, strings.TrimSuffix(p, "/"))
		}
		if method == "" {
			anyMethod[p] = true
			continue
		}
		if method == http.MethodGet {
			allow[p] = append(allow[p], http.MethodHead)
		}
		allow[p] = append(allow[p], method)
	}
	for p, methods := range allow {
		if anyMethod[p] {
			continue
		}
		slices.Sort(methods)
		allowed := strings.Join(methods, ", ")
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allowed)
			writeError(w, http.StatusMethodNotAllowed, api.CodeBadRequest, "method "+r.Method+" not allowed on "+r.URL.Path+" (allowed: "+allowed+")")
		})
	}
	for _, p := range subtrees {
		if !anyMethod[p] && allow[p] == nil {
			mux.HandleFunc(p, notFound)
		}
	}
	if !anyMethod["/"] {
		mux.HandleFunc("/", notFound)
	}
	return mux
}
