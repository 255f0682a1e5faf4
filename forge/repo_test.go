package forge_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"remote/config"
	"remote/forge"
	"remote/internal/errdefs"
)

func testForges() map[string]config.Forge {
	fs := config.Default().Forges
	fs["gitea.example.com:3000"] = config.Forge{Kind: "gitea", API: "https://gitea.example.com:3000/api/v1"}
	fs["codeberg.org"] = config.Forge{Kind: "gitea", API: "https://codeberg.org/api/v1"}
	return fs
}

// TestForRepo: https, ssh:// and scp-like clone URLs pick the configured
// forge by host and give the repository's path.
func TestForRepo(t *testing.T) {
	for _, tc := range []struct {
		url, kind, api, path string
	}{
		{"https://github.com/octo/hello.git", "github", "https://api.github.com", "octo/hello"},
		{"https://github.com/octo/hello", "github", "https://api.github.com", "octo/hello"},
		{"https://GitHub.com/octo/hello/", "github", "https://api.github.com", "octo/hello"},
		{"https://github.com:443/octo/hello.git", "github", "https://api.github.com", "octo/hello"},
		{"git@github.com:octo/hello.git", "github", "https://api.github.com", "octo/hello"},
		{"github.com:octo/hello", "github", "https://api.github.com", "octo/hello"},
		{"ssh://git@github.com/octo/hello.git", "github", "https://api.github.com", "octo/hello"},
		{"https://gitlab.com/group/sub/hello.git", "gitlab", "https://gitlab.com/api/v4", "group/sub/hello"},
		{"ssh://git@gitlab.com:2222/group/hello.git", "gitlab", "https://gitlab.com/api/v4", "group/hello"},
		{"https://gitea.example.com:3000/o/r.git", "gitea", "https://gitea.example.com:3000/api/v1", "o/r"},
		{"https://codeberg.org/forgejo/forgejo.git", "gitea", "https://codeberg.org/api/v1", "forgejo/forgejo"},
	} {
		f, path, err := forge.ForRepo(testForges(), tc.url)
		if err != nil {
			t.Errorf("ForRepo(%q): %v", tc.url, err)
			continue
		}
		if string(f.Kind) != tc.kind || f.API != tc.api || path != tc.path || f.HTTP != nil {
			t.Errorf("ForRepo(%q) = %+v %q, want %s %s %q", tc.url, f, path, tc.kind, tc.api, tc.path)
		}
	}
}

// TestForRepoRefuses: URLs that name no repository, carry credentials or
// use another scheme are invalid arguments saying why, and never repeat a
// password; an unconfigured host is ErrNoForge naming the host.
func TestForRepoRefuses(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"", "repository URL is empty"},
		{"https://user:hunter2@github.com/octo/hello.git", "repository URL carries a user or password: give the token as the project's tokenSecret instead"},
		{"https://hunter2@github.com/octo/hello.git", "repository URL carries a user or password"},
		{"ftp://github.com/octo/hello", `repository URL scheme "ftp" is not https, http or ssh`},
		{"file:///srv/git/hello.git", `repository URL scheme "file" is not https, http or ssh`},
		{"/srv/git/hello.git", "repository URL is neither https://host/owner/name nor host:owner/name"},
		{"https://github.com/octo", `repository URL on github.com: repo "octo" is not owner/name`},
		{"https://github.com/octo/hello/tree/main", `repository URL on github.com: repo "octo/hello/tree/main" is not owner/name`},
		{"https://github.com/octo/../hello", `repository URL on github.com: repo "octo/../hello" is not owner/name`},
		{"https://gitlab.com/group/../hello", `repository URL on gitlab.com: repo "group/../hello": ".." is not a valid owner, group or repository name`},
		{"https://github.com/../hello", `repository URL on github.com: repo "../hello": ".." is not a valid owner, group or repository name`},
		{"https://github.com/", "repository URL on github.com names no repository"},
		{"https://github.com/octo/hello?ref=x", "repository URL has a query or fragment"},
		{"https://github.com/octo/hello#x", "repository URL has a query or fragment"},
		{"https://github.com/octo/he llo", "repository URL contains a space or control character"},
	} {
		_, _, err := forge.ForRepo(testForges(), tc.url)
		if !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("ForRepo(%q) = %v, want invalid argument %q", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ForRepo(%q) repeats the password: %v", tc.url, err)
		}
	}
	for _, tc := range []struct{ url, host string }{
		{"https://bitbucket.org/octo/hello.git", "bitbucket.org"},
		{"https://gitea.example.com/o/r.git", "gitea.example.com"}, // configured with :3000 only
		{"git@gitea.example.com:o/r.git", "gitea.example.com"},
	} {
		_, _, err := forge.ForRepo(testForges(), tc.url)
		want := `no forge is configured for host "` + tc.host + `": the operator adds [forges."` + tc.host + `"] kind and api to the daemon's configuration`
		if !errors.Is(err, forge.ErrNoForge) || !errdefs.IsFailedPrecondition(err) || err.Error() != want {
			t.Errorf("ForRepo(%q) = %v, want ErrNoForge %q", tc.url, err, want)
		}
	}
}

// TestAttackRepoURLPointsAtLoopback: a user's repository URL naming the
// host's loopback (a port where a listener waits) is not a configured
// forge, so no request goes there: the API a token is sent to comes only
// from the operator's [forges]. The listener must see no connection,
// whatever form or trick the URL uses.
func TestAttackRepoURLPointsAtLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	for _, u := range []string{
		"http://" + addr + "/owner/x.git",
		"https://" + addr + "/owner/x.git",
		"ssh://git@" + addr + "/owner/x.git",
		"git@127.0.0.1:owner/x.git",
		"http://github.com@" + addr + "/owner/x.git",
		"http://" + addr + "/github.com/owner/x.git",
		"http://" + addr + "#@github.com/owner/x.git",
		"http://" + addr + "\\@github.com/owner/x.git",
	} {
		f, path, err := forge.ForRepo(testForges(), u)
		if err == nil {
			t.Errorf("ForRepo(%q) = %+v %q, want an error", u, f, path)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, _ = f.OpenPullRequest(ctx, "user-token", forge.PullRequest{Repo: path, Head: "h", Base: "main", Title: "t"})
			cancel()
		}
	}
	time.Sleep(50 * time.Millisecond) //nolint:forbidigo // let a connection, if any, be accepted
	if n := conns.Load(); n != 0 {
		t.Errorf("the loopback listener got %d connections, want none", n)
	}
}
