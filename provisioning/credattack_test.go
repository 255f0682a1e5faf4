package provisioning

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"remote/api"
	"remote/internal/hostfs"
	"remote/internal/testkit"
	"remote/providers"
	"remote/providers/runner"
)

// claudeCred is a Claude Code .credentials.json record with token tok.
func claudeCred(tok string) string {
	return `{"claudeAiOauth":{"accessToken":"at-` + tok + `","refreshToken":"rt-` + tok + `","expiresAt":1893456000000,"scopes":["user:inference"]}}`
}

// codexCred is a Codex auth.json ChatGPT record of account acct.
func codexCred(tok, acct string) string {
	return `{"OPENAI_API_KEY":null,"tokens":{"id_token":"id-` + tok + `","access_token":"at-` + tok + `","refresh_token":"rt-` + tok + `","account_id":"` + acct + `"},"last_refresh":"2026-01-01T00:00:00Z"}`
}

// userFixture is a fixture whose host user is nobody with a home of its
// own (owned by nobody, reachable by it), as on a real shared host where
// the daemon runs as root.
type userFixture struct {
	*fixture
	user hostfs.User
}

func newUserFixture(t *testing.T) *userFixture {
	t.Helper()
	testkit.NeedsRoot(t, "acting for another host user needs a root daemon")
	cl := testkit.LXD(t)
	base, err := os.MkdirTemp("", "rdhome")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	home := filepath.Join(base, "nobody")
	u := hostfs.User{UID: 65534, GID: 65534}
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(home, int(u.UID), int(u.GID))
	f := &fixture{cl: cl, lxd: &countingLXD{Client: cl}, home: home, project: "p1"}
	f.name = newProjectContainer(t, cl, "cred")
	f.store = newMemStore(api.Project{Name: f.project, Container: f.name, Status: StatusMissing})
	deps, steps := NewDependencies(StepsOptions{LXD: f.lxd, Providers: testSetup(t, home), HostUser: u, HostHome: home})
	prep, err := New(Options{LXD: f.lxd, Projects: f.store, Image: testkit.TestImage, Deps: deps, CredentialSyncTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	f.prep, f.steps = prep, steps
	return &userFixture{fixture: f, user: u}
}

// userFile writes a file owned by the host user (as the user would).
func (f *userFixture) userFile(t *testing.T, rel, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(f.home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	for d := filepath.Dir(p); d != f.home; d = filepath.Dir(d) {
		os.Chown(d, int(f.user.UID), int(f.user.GID))
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, mode)
	os.Chown(p, int(f.user.UID), int(f.user.GID))
	return p
}

// rootSecret makes a root-only directory holding secrets.key and returns
// both paths.
func rootSecret(t *testing.T) (dir, key string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "rdroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o700)
	key = filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(key, []byte("ROOT-ONLY-SECRET-KEY"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, key
}

// TestAttackCredentialSymlinkRead: the host user points its Claude
// credential file (or its ~/.claude directory, or a hard link) at a
// root-only secret; the daemon must not read it as root and push it into
// the project container, where the user (or its agent) could read it.
func TestAttackCredentialSymlinkRead(t *testing.T) {
	f := newUserFixture(t)
	ctx := context.Background()
	dir, key := rootSecret(t)
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}
	credPath := filepath.Join(f.home, ".claude/.credentials.json")
	leaked := func(t *testing.T) {
		t.Helper()
		out := sh(t, f.cl, f.name, `cat /root/.claude/.credentials.json 2>/dev/null; true`)
		if strings.Contains(out, "ROOT-ONLY-SECRET-KEY") {
			t.Fatalf("root-only secret pushed into the container: %q", out)
		}
	}

	t.Run("symlinked file", func(t *testing.T) {
		f.userFile(t, ".claude/placeholder", "", 0o600)
		if err := os.Symlink(key, credPath); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(credPath)
		_, err := f.prep.Prepare(ctx, req, nil)
		leaked(t)
		want := credPath + ": refused host file: a symbolic link on the way"
		if !errors.Is(err, hostfs.ErrUnsafe) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Prepare err %v, want one containing %q", err, want)
		}
	})

	t.Run("symlinked directory", func(t *testing.T) {
		os.RemoveAll(filepath.Join(f.home, ".claude"))
		if err := os.Rename(key, filepath.Join(dir, ".credentials.json")); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(filepath.Join(dir, ".credentials.json"), key)
		if err := os.Symlink(dir, filepath.Join(f.home, ".claude")); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(f.home, ".claude"))
		_, err := f.prep.Prepare(ctx, req, nil)
		leaked(t)
		if !errors.Is(err, hostfs.ErrUnsafe) || !strings.Contains(err.Error(), "a symbolic link on the way") {
			t.Fatalf("Prepare err %v, want a refused symbolic link", err)
		}
	})

	t.Run("hard link to a root file", func(t *testing.T) {
		f.userFile(t, ".claude/placeholder", "", 0o600)
		if err := os.Link(key, credPath); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(credPath)
		// Read with the user's rights, a root-only file is not readable.
		_, err := f.prep.Prepare(ctx, req, nil)
		leaked(t)
		want := "open " + credPath + ": permission denied"
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Prepare err %v, want one containing %q", err, want)
		}
		// One the user may read is still not the user's.
		os.Chmod(key, 0o644)
		defer os.Chmod(key, 0o600)
		_, err = f.prep.Prepare(ctx, req, nil)
		leaked(t)
		want = credPath + ": refused host file: owned by uid 0, not uid 65534"
		if !errors.Is(err, hostfs.ErrUnsafe) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Prepare err %v, want one containing %q", err, want)
		}
	})

	t.Run("the user's own file is pushed", func(t *testing.T) {
		f.userFile(t, ".claude/.credentials.json", claudeCred("mine"), 0o600)
		if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
			t.Fatal(err)
		}
		if out := sh(t, f.cl, f.name, `cat /root/.claude/.credentials.json`); out != claudeCred("mine") {
			t.Fatalf("container credentials %q", out)
		}
	})
}

// TestAttackCredentialSyncBackSymlinkDir: after a run, the host user
// replaces ~/.claude by a symlink to a root-only directory; sync-back
// must not write the container's file there as root. A normal sync-back
// leaves the file the host user's, with its mode.
func TestAttackCredentialSyncBackSymlinkDir(t *testing.T) {
	f := newUserFixture(t)
	ctx := context.Background()
	hostPath := f.userFile(t, ".claude/.credentials.json", claudeCred("host-1"), 0o640)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(hostPath, old, old)
	req := providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}
	if _, err := f.prep.Prepare(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	tgt := providers.Target{ProjectID: f.project, Container: f.name}

	t.Run("normal sync keeps owner and mode", func(t *testing.T) {
		sh(t, f.cl, f.name, `echo '`+claudeCred("refreshed-2")+`' > /root/.claude/.credentials.json`)
		if err := f.prep.SyncCredentials(ctx, tgt, providers.Claude); err != nil {
			t.Fatalf("SyncCredentials: %v", err)
		}
		b, _ := os.ReadFile(hostPath)
		fi, err := os.Stat(hostPath)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if strings.TrimSpace(string(b)) != claudeCred("refreshed-2") || st.Uid != 65534 || fi.Mode().Perm() != 0o640 {
			t.Fatalf("host credentials %q uid %d mode %v, want refreshed-2, uid 65534, 0640", b, st.Uid, fi.Mode().Perm())
		}
	})

	t.Run("symlinked directory is refused", func(t *testing.T) {
		dir, _ := rootSecret(t)
		os.RemoveAll(filepath.Join(f.home, ".claude"))
		if err := os.Symlink(dir, filepath.Join(f.home, ".claude")); err != nil {
			t.Fatal(err)
		}
		sh(t, f.cl, f.name, `echo '`+claudeCred("attacker-3")+`' > /root/.claude/.credentials.json`)
		err := f.prep.SyncCredentials(ctx, tgt, providers.Claude)
		if _, serr := os.Lstat(filepath.Join(dir, ".credentials.json")); serr == nil {
			t.Fatal("sync-back wrote into the root-only directory behind the symlink")
		}
		want := hostPath + ": refused host file: a symbolic link on the way"
		if !errors.Is(err, providers.ErrCredentialSyncRejected) || !strings.Contains(err.Error(), want) {
			t.Fatalf("SyncCredentials err %v, want a rejected sync containing %q", err, want)
		}
	})
}

// TestAttackCredentialSyncBackPoison: an agent in the container writes a
// credential record meant to reach the host user's login (and with it
// every other project): an API-key record, a record of the wrong shape,
// another account, or a valid one with a far-future mtime (which made the
// host copy look newer than anything later). The first three are refused
// with a credential_sync_rejected event that never carries the content;
// the last is accepted with its mtime clamped to now.
func TestAttackCredentialSyncBackPoison(t *testing.T) {
	f := newUserFixture(t)
	ctx := context.Background()
	claudePath := f.userFile(t, ".claude/.credentials.json", claudeCred("host-1"), 0o600)
	codexPath := f.userFile(t, ".codex/auth.json", codexCred("host-1", "acct-host"), 0o600)
	for _, p := range []providers.ProviderID{providers.Claude, providers.Codex} {
		if _, err := f.prep.Prepare(ctx, providers.PrepareRequest{Provider: p, ProjectID: f.project}, nil); err != nil {
			t.Fatal(err)
		}
	}
	tgt := providers.Target{ProjectID: f.project, Container: f.name}
	log := testkit.Logger(t, "provision")

	for _, tc := range []struct {
		name, path, container, content, reason string
		provider                               providers.ProviderID
	}{
		{"codex api-key record", codexPath, "/root/.codex/auth.json", `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-attacker-key"}`,
			"codex auth record uses api-key authentication", providers.Codex},
		{"codex key without tokens", codexPath, "/root/.codex/auth.json", `{"OPENAI_API_KEY":"sk-attacker-key"}`,
			"codex auth record uses api-key authentication", providers.Codex},
		{"codex other account", codexPath, "/root/.codex/auth.json", codexCred("sk-attacker-key", "acct-attacker"),
			"tokens.account_id differs from the host's (another account)", providers.Codex},
		{"claude bad shape", claudePath, "/root/.claude/.credentials.json", `{"token":"sk-attacker-key"}`,
			"no claudeAiOauth object", providers.Claude},
		{"claude not json", claudePath, "/root/.claude/.credentials.json", `sk-attacker-key`,
			"not a JSON object", providers.Claude},
		{"claude logged out", claudePath, "/root/.claude/.credentials.json", `{"claudeAiOauth":{"accessToken":"","refreshToken":"","expiresAt":0,"x":"sk-attacker-key"}}`,
			"claudeAiOauth lacks an accessToken or a refreshToken", providers.Claude},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(tc.path)
			old := time.Now().Add(-time.Hour)
			os.Chtimes(tc.path, old, old)
			sh(t, f.cl, f.name, `printf '%s' '`+tc.content+`' > `+tc.container)
			var ev collect
			runner.SyncCredentials(ctx, f.prep, tgt, tc.provider, 20*time.Second, log, ev.emit)
			after, _ := os.ReadFile(tc.path)
			if string(after) != string(before) {
				t.Fatalf("host record replaced by %q", after)
			}
			if got := ev.subtypes(); !slices.Equal(got, []string{"credential_sync_rejected"}) {
				t.Fatalf("events %v, want [credential_sync_rejected]", got)
			}
			data := string(ev.evs[0].Data)
			wantProvider := fmt.Sprintf(`"provider":%q`, tc.provider)
			if !strings.Contains(data, tc.reason) || !strings.Contains(data, wantProvider) || strings.Contains(data, "sk-attacker-key") {
				t.Fatalf("event data %s, want provider %s and reason %q, never the content", data, tc.provider, tc.reason)
			}
		})
	}

	t.Run("future mtime is clamped", func(t *testing.T) {
		old := time.Now().Add(-time.Hour)
		os.Chtimes(claudePath, old, old)
		sh(t, f.cl, f.name, `echo '`+claudeCred("future-4")+`' > /root/.claude/.credentials.json; touch -d '2099-01-01 00:00:00' /root/.claude/.credentials.json`)
		var ev collect
		runner.SyncCredentials(ctx, f.prep, tgt, providers.Claude, 20*time.Second, log, ev.emit)
		b, _ := os.ReadFile(claudePath)
		fi, _ := os.Stat(claudePath)
		if strings.TrimSpace(string(b)) != claudeCred("future-4") || len(ev.evs) != 0 {
			t.Fatalf("host %q events %v, want the valid record synced", b, ev.subtypes())
		}
		if fi.ModTime().After(time.Now()) {
			t.Fatalf("host credentials mtime %v is in the future", fi.ModTime())
		}
	})
}

// TestProjectCredentialsStayInTheProject: a project created with
// credentials "project" never gets the host user's login pushed in, and
// the login its container makes is never synced back to the host.
func TestProjectCredentialsStayInTheProject(t *testing.T) {
	f := newUserFixture(t)
	ctx := context.Background()
	f.store.UpdateProject(f.project, func(p *api.Project) error { p.Credentials = api.CredentialsProject; return nil })
	hostPath := f.userFile(t, ".claude/.credentials.json", claudeCred("host-1"), 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(hostPath, old, old)
	tgt, err := f.prep.Prepare(ctx, providers.PrepareRequest{Provider: providers.Claude, ProjectID: f.project}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tgt.SharedCredentials {
		t.Fatal("a project-credentials target is marked as sharing the host's logins: the operator's project_env keys would reach it")
	}
	if out := sh(t, f.cl, f.name, `cat /root/.claude/.credentials.json 2>/dev/null; true`); out != "" {
		t.Fatalf("host login pushed into a project-credentials container: %q", out)
	}
	sh(t, f.cl, f.name, `mkdir -p /root/.claude; echo '`+claudeCred("own-5")+`' > /root/.claude/.credentials.json`)
	if err := f.prep.SyncCredentials(ctx, providers.Target{ProjectID: f.project, Container: f.name}, providers.Claude); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(hostPath); string(b) != claudeCred("host-1") {
		t.Fatalf("host login replaced by the project's: %q", b)
	}
}
