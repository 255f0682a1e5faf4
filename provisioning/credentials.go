package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"remote/internal/hostfs"
	"remote/internal/revert"
	"remote/lxdexec"
	"remote/providers"
)

// maxCredentialBytes bounds one credential file.
const maxCredentialBytes = 1 << 20

// PushCredentials pushes the provider's host credential files that exist,
// mode 0600 and owned by the container user. Either all of them arrive or
// none: a failure removes the ones pushed by this call. A Codex record
// marked as API-key authentication is refused (S13). Host files are read
// with the host user's rights beneath its home (hostFile): no symlink on
// the way, a regular file owned by the host user, at most 1 MiB.
func (s *Steps) PushCredentials(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	var rev revert.Reverter
	defer rev.Fail()
	var done []func()
	for _, cred := range st.Credentials {
		root, rel := s.hostFile(cred.Host)
		b, err := root.ReadFile(rel, maxCredentialBytes)
		if errors.Is(err, fs.ErrNotExist) {
			s.log.Debug("no host credential file", "provider", p, "path", cred.Host)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s credentials: %w", p, err)
		}
		if cred.RejectAPIKey && apiKeyAuth(b) {
			return fmt.Errorf("%s credentials %q: %w", p, cred.Host, ErrAPIKeyAuth)
		}
		h := hashOf(b)
		if s.cached(c, cred.Container, h) {
			continue
		}
		// Mode and owner apply only when LXD creates the file.
		if err := s.opts.LXD.DeleteFile(ctx, c.Name, cred.Container); err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("replace %s credentials %q in %q: %w", p, cred.Container, c.Name, classify(err))
		}
		target := cred.Container
		rev.Add(func() { _ = s.opts.LXD.DeleteFile(context.WithoutCancel(ctx), c.Name, target) })
		err = s.opts.LXD.PushFile(ctx, c.Name, cred.Container, strings.NewReader(string(b)),
			lxdexec.FileOptions{Mode: 0o600, UID: s.opts.UID, GID: s.opts.GID, MkdirParents: true})
		if err != nil {
			return fmt.Errorf("push %s credentials %q into %q: %w", p, cred.Container, c.Name, classify(err))
		}
		done = append(done, func() { s.remember(c, target, h) })
	}
	rev.Success()
	for _, f := range done {
		f()
	}
	return nil
}

// hostFile is where a host credential file is resolved: beneath the host
// user's home when it lies there, else beneath "/", always with the host
// user's rights and owned by the host user.
func (s *Steps) hostFile(p string) (hostfs.Root, string) {
	dir, rel := hostfs.Split(s.opts.HostHome, p)
	return hostfs.Root{Dir: dir, User: s.opts.HostUser, Owner: int64(s.opts.HostUser.UID)}, rel
}

// apiKeyAuth reports whether a Codex auth record is explicitly marked as
// API-key authentication, or holds an OPENAI_API_KEY without ChatGPT
// tokens (S13).
func apiKeyAuth(b []byte) bool {
	var rec struct {
		AuthMode *string         `json:"auth_mode"`
		APIKey   *string         `json:"OPENAI_API_KEY"`
		Tokens   json.RawMessage `json:"tokens"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return false
	}
	if rec.AuthMode != nil {
		m := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(*rec.AuthMode))
		return m == "apikey"
	}
	noTokens := len(rec.Tokens) == 0 || string(rec.Tokens) == "null"
	return rec.APIKey != nil && *rec.APIKey != "" && noTokens
}

// SyncCredentials copies each synced credential back to the host when the
// container's copy is newer than the host's. The content is validated
// first (validateCredential); the host file is replaced atomically with
// the host user's rights, keeping its mode (new: 0600), with a
// modification time no later than now. A refused copy is an error
// wrapping providers.ErrCredentialSyncRejected and changes nothing.
func (s *Steps) SyncCredentials(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	var errs []error
	for _, cred := range st.Credentials {
		if !cred.Sync {
			continue
		}
		if err := s.syncOne(ctx, c, p, cred); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Steps) syncOne(ctx context.Context, c Container, p providers.ProviderID, cred Credential) error {
	rc, info, err := s.opts.LXD.PullFile(ctx, c.Name, cred.Container)
	if errors.Is(err, lxdexec.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pull %s credentials %q from %q: %w", p, cred.Container, c.Name, classify(err))
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxCredentialBytes+1))
	rc.Close()
	if err != nil {
		return fmt.Errorf("pull %s credentials %q from %q: %w", p, cred.Container, c.Name, classify(err))
	}
	if len(b) > maxCredentialBytes {
		return fmt.Errorf("pull %s credentials %q from %q: %w: larger than %d bytes", p, cred.Container, c.Name, providers.ErrCredentialSyncRejected, maxCredentialBytes)
	}
	mtime := time.Time{}
	if info != nil {
		mtime = info.ModTime
	}
	if mtime.IsZero() {
		if mtime, err = s.containerMTime(ctx, c.Name, cred.Container); err != nil {
			return err
		}
	}
	root, rel := s.hostFile(cred.Host)
	hostTime, err := root.ModTime(rel)
	if err == nil && !mtime.After(hostTime) {
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("host %s credentials: %w", p, s.rejected(err))
	}
	hostB, herr := root.ReadFile(rel, maxCredentialBytes)
	if herr == nil && string(hostB) == string(b) {
		return nil
	}
	if herr != nil && !errors.Is(herr, fs.ErrNotExist) {
		return fmt.Errorf("host %s credentials: %w", p, s.rejected(herr))
	}
	if err := validateCredential(p, cred, b, hostB); err != nil {
		return fmt.Errorf("%s credentials %q from %q: %w: %w", p, cred.Container, c.Name, providers.ErrCredentialSyncRejected, err)
	}
	if err := root.WriteFile(rel, b, mtime); err != nil {
		return fmt.Errorf("write host %s credentials: %w", p, s.rejected(err))
	}
	s.remember(c, cred.Container, hashOf(b))
	s.log.Info("synced credentials back from container", "provider", p, "container", c.Name, "path", cred.Host)
	return nil
}

// rejected marks an unsafe host path as a refused sync.
func (s *Steps) rejected(err error) error {
	if errors.Is(err, hostfs.ErrUnsafe) {
		return fmt.Errorf("%w: %w", providers.ErrCredentialSyncRejected, err)
	}
	return err
}

// containerMTime reads a file's modification time with stat in the
// container (LXD's file API does not report it).
func (s *Steps) containerMTime(ctx context.Context, container, p string) (time.Time, error) {
	code, out, err := s.run(ctx, container, []string{"stat", "-c", "%Y", p})
	if err != nil {
		return time.Time{}, err
	}
	sec, perr := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if code != 0 || perr != nil {
		return time.Time{}, fmt.Errorf("stat %q in %q: exit %d", p, container, code)
	}
	return time.Unix(sec, 0), nil
}

// validateCredential checks a credential record copied back from a
// container before it replaces the host's (hostB, nil when the host has
// none). Every record is a JSON object; Claude's holds claudeAiOauth with
// an access and a refresh token; Codex's holds ChatGPT tokens, is not an
// API-key record (S13) and keeps the host record's account. Messages name
// what is wrong, never a value.
func validateCredential(p providers.ProviderID, cred Credential, b, hostB []byte) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil || obj == nil {
		return errors.New("not a JSON object")
	}
	nonEmpty := func(raw json.RawMessage) bool {
		var v string
		return json.Unmarshal(raw, &v) == nil && strings.TrimSpace(v) != ""
	}
	switch {
	case p == providers.Claude:
		var rec struct {
			OAuth *struct {
				AccessToken  json.RawMessage `json:"accessToken"`
				RefreshToken json.RawMessage `json:"refreshToken"`
				ExpiresAt    json.RawMessage `json:"expiresAt"`
			} `json:"claudeAiOauth"`
		}
		if json.Unmarshal(b, &rec) != nil || rec.OAuth == nil {
			return errors.New("no claudeAiOauth object")
		}
		if !nonEmpty(rec.OAuth.AccessToken) || !nonEmpty(rec.OAuth.RefreshToken) {
			return errors.New("claudeAiOauth lacks an accessToken or a refreshToken")
		}
		var exp float64
		if len(rec.OAuth.ExpiresAt) > 0 && json.Unmarshal(rec.OAuth.ExpiresAt, &exp) != nil {
			return errors.New("claudeAiOauth.expiresAt is not a number")
		}
	case p == providers.Codex || cred.RejectAPIKey:
		if apiKeyAuth(b) {
			return ErrAPIKeyAuth
		}
		var rec codexRecord
		if json.Unmarshal(b, &rec) != nil || rec.Tokens == nil {
			return errors.New("no ChatGPT tokens object")
		}
		if rec.APIKey != nil && *rec.APIKey != "" {
			return errors.New("holds an OPENAI_API_KEY")
		}
		if !nonEmpty(rec.Tokens.AccessToken) || !nonEmpty(rec.Tokens.RefreshToken) {
			return errors.New("tokens lack an access_token or a refresh_token")
		}
		var host codexRecord
		if hostB != nil && json.Unmarshal(hostB, &host) == nil && host.Tokens != nil && host.Tokens.AccountID != "" &&
			rec.Tokens.AccountID != host.Tokens.AccountID {
			return errors.New("tokens.account_id differs from the host's (another account)")
		}
	}
	return nil
}

// codexRecord is the part of Codex's auth.json validation looks at.
type codexRecord struct {
	APIKey *string `json:"OPENAI_API_KEY"`
	Tokens *struct {
		AccessToken  json.RawMessage `json:"access_token"`
		RefreshToken json.RawMessage `json:"refresh_token"`
		AccountID    string          `json:"account_id"`
	} `json:"tokens"`
}
