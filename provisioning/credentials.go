package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"remote/lxdexec"
	"remote/providers"
)

// maxCredentialBytes bounds one credential file.
const maxCredentialBytes = 1 << 20

// PushCredentials pushes the provider's host credential files that exist,
// mode 0600 and owned by the container user. Either all of them arrive or
// none: a failure removes the ones pushed by this call. A Codex record
// marked as API-key authentication is refused (S13).
func (s *Steps) PushCredentials(ctx context.Context, c Container, p providers.ProviderID) error {
	st, err := s.setup(p)
	if err != nil {
		return err
	}
	var rev reverter
	defer rev.fail()
	var done []func()
	for _, cred := range st.Credentials {
		b, err := readBounded(cred.Host, maxCredentialBytes)
		if errors.Is(err, os.ErrNotExist) {
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
		rev.add(func() { _ = s.opts.LXD.DeleteFile(context.WithoutCancel(ctx), c.Name, target) })
		err = s.opts.LXD.PushFile(ctx, c.Name, cred.Container, strings.NewReader(string(b)),
			lxdexec.FileOptions{Mode: 0o600, UID: s.opts.UID, GID: s.opts.GID, MkdirParents: true})
		if err != nil {
			return fmt.Errorf("push %s credentials %q into %q: %w", p, cred.Container, c.Name, classify(err))
		}
		done = append(done, func() { s.remember(c, target, h) })
	}
	rev.success()
	for _, f := range done {
		f()
	}
	return nil
}

// apiKeyAuth reports whether a Codex auth record is explicitly marked as
// API-key authentication.
func apiKeyAuth(b []byte) bool {
	var rec struct {
		AuthMode string `json:"auth_mode"`
	}
	if json.Unmarshal(b, &rec) != nil {
		return false
	}
	m := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(rec.AuthMode))
	return m == "apikey"
}

// SyncCredentials copies each synced credential back to the host when the
// container's copy is newer than the host's. The host file is replaced
// atomically with mode 0600.
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
		return fmt.Errorf("pull %s credentials %q from %q: larger than %d bytes", p, cred.Container, c.Name, maxCredentialBytes)
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
	host, err := os.Stat(cred.Host)
	if err == nil && !mtime.After(host.ModTime()) {
		return nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("stat host %s credentials %q: %w", p, cred.Host, err)
	}
	if hostB, err := os.ReadFile(cred.Host); err == nil && string(hostB) == string(b) {
		return nil
	}
	if err := writeAtomic(cred.Host, b, mtime); err != nil {
		return fmt.Errorf("write host %s credentials: %w", p, err)
	}
	s.remember(c, cred.Container, hashOf(b))
	s.log.Info("synced credentials back from container", "provider", p, "container", c.Name, "path", cred.Host)
	return nil
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

// writeAtomic replaces path with b (mode 0600) through a temporary file
// and a rename, and sets its modification time.
func writeAtomic(path string, b []byte, mtime time.Time) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".sync-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if !mtime.IsZero() {
		_ = os.Chtimes(tmp.Name(), mtime, mtime)
	}
	return os.Rename(tmp.Name(), path)
}
