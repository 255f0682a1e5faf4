package egress

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strings"
	"sync"

	"remote/api"
)

// SetupUser is the user name of a setup credential in a proxy URL
// (http://setup:TOKEN@127.0.0.1:3128).
const SetupUser = "setup"

// grant is one live setup credential: its token and the hosts it adds.
type grant struct {
	token []byte
	allow []string
}

// grants are the live setup credentials, by project id.
type grants struct {
	mu sync.Mutex
	m  map[string]map[*grant]struct{}
}

// Grant mints a one-time proxy credential for one exec of projectID's
// environment (its setup or maintenance): a request through the
// project's socket carrying it (Proxy-Authorization: Basic, user
// SetupUser) is decided as in allowlist mode with allow added to the
// project's own list (each entry still checked against
// project_may_allow, and dialled at a public address only). The token
// is 32 random bytes in hex; it is valid only until revoke is called
// (the exec exited), never written anywhere by the proxy, and compared
// in constant time.
func (s *Server) Grant(projectID string, allow []string) (token string, revoke func()) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	token = hex.EncodeToString(b)
	g := &grant{token: []byte(token), allow: append([]string(nil), allow...)}
	s.grants.mu.Lock()
	if s.grants.m == nil {
		s.grants.m = map[string]map[*grant]struct{}{}
	}
	if s.grants.m[projectID] == nil {
		s.grants.m[projectID] = map[*grant]struct{}{}
	}
	s.grants.m[projectID][g] = struct{}{}
	s.grants.mu.Unlock()
	return token, sync.OnceFunc(func() {
		s.grants.mu.Lock()
		defer s.grants.mu.Unlock()
		delete(s.grants.m[projectID], g)
		if len(s.grants.m[projectID]) == 0 {
			delete(s.grants.m, projectID)
		}
	})
}

// credential reads r's Proxy-Authorization: present reports whether it
// carries one at all; g is the live grant of projectID it names (nil:
// none, the credential is refused).
func (s *Server) credential(projectID string, r *http.Request) (g *grant, present bool) {
	h := r.Header.Get("Proxy-Authorization")
	if h == "" {
		return nil, false
	}
	scheme, enc, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return nil, true
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return nil, true
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok || user != SetupUser {
		return nil, true
	}
	s.grants.mu.Lock()
	defer s.grants.mu.Unlock()
	var found *grant
	for c := range s.grants.m[projectID] { // every one compared: no early exit
		if subtle.ConstantTimeCompare(c.token, []byte(pass)) == 1 {
			found = c
		}
	}
	return found, true
}

// withGrant is proj as a request carrying g sees it: allowlist mode with
// g's hosts added to the project's own list (an off project's own list
// is not in force, so only g's).
func withGrant(proj api.Project, g *grant) api.Project {
	n := api.ProjectNetwork{Mode: api.NetworkAllowlist}
	if proj.Network != nil {
		switch proj.Network.Mode {
		case api.NetworkOpen:
			n.Mode = api.NetworkOpen
		case api.NetworkAllowlist:
			n.Allow = append(n.Allow, proj.Network.Allow...)
		}
	}
	n.Allow = append(n.Allow, g.allow...)
	proj.Network = &n
	return proj
}
