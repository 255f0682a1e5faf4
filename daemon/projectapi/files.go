package projectapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/provisioning"
)

// ProjectFiles reaches files in containers through LXD's file API (never
// exec); *lxdconn.Conn implements it.
type ProjectFiles interface {
	ListDir(ctx context.Context, instance, path string) ([]string, error)
	StatFile(ctx context.Context, instance, path string) (*lxdexec.FileInfo, error)
	PullFile(ctx context.Context, instance, path string) (io.ReadCloser, *lxdexec.FileInfo, error)
	PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error
	DeleteFile(ctx context.Context, instance, path string) error
}

// WorkspaceRoot is the only directory the file routes reach.
const WorkspaceRoot = "/workspace"

// Bounds of the file routes.
const (
	maxFilePath    = 4096 // bytes of a path, as PATH_MAX
	maxListEntries = 1000 // entries one listing describes
	statParallel   = 8    // LXD HEAD requests in flight per listing
)

// WorkspacePath turns the path query parameter of a file route into an
// absolute, clean path under /workspace: relative paths are taken from
// /workspace, absolute ones must lie under it. Empty paths, NUL bytes,
// paths longer than 4096 bytes and paths that leave /workspace (by ".."
// or by being absolute elsewhere) are refused with an invalid-argument
// error naming path. Symlinks are not resolved here: LXD resolves them
// inside the container's own root (see docs/threat-model.md).
func WorkspacePath(raw string) (string, error) {
	switch {
	case raw == "":
		return "", errdefs.InvalidArgument("path: must not be empty; give a path under %s", WorkspaceRoot)
	case strings.IndexByte(raw, 0) >= 0:
		return "", errdefs.InvalidArgument("path: contains a NUL byte")
	case len(raw) > maxFilePath:
		return "", errdefs.InvalidArgument("path: longer than %d bytes", maxFilePath)
	}
	p := raw
	if !path.IsAbs(p) {
		p = WorkspaceRoot + "/" + p
	}
	p = path.Clean(p)
	if p != WorkspaceRoot && !strings.HasPrefix(p, WorkspaceRoot+"/") {
		return "", errdefs.InvalidArgument("path %q: outside %s", raw, WorkspaceRoot)
	}
	return p, nil
}

// fileTarget resolves the project and the path of a file route, and
// refuses a container known not to run (as previews do; a GET never
// starts one, so a link in a page cannot).
func (p *Projects) fileTarget(r *http.Request, raw string) (api.Project, string, error) {
	proj, err := p.lookup(r)
	if err != nil {
		return api.Project{}, "", err
	}
	if p.o.Files == nil {
		return api.Project{}, "", errdefs.Unavailable("file routes are off: the daemon has no LXD file access")
	}
	fp, err := WorkspacePath(raw)
	if err != nil {
		return api.Project{}, "", err
	}
	if proj.Container == "" || proj.Status == provisioning.StatusStopped || proj.Status == provisioning.StatusMissing {
		return api.Project{}, "", &daemon.Error{Status: http.StatusServiceUnavailable, Code: api.CodeUnavailable,
			Message: fmt.Sprintf("project %q is not running: start it with POST /v1/projects/%s/start", proj.Name, proj.Name)}
	}
	return proj, fp, nil
}

// fileError names the path in LXD's answers: a missing path is a 404, a
// path of the wrong kind a 400; other failures keep their class.
func fileError(proj api.Project, fp string, err error) error {
	switch {
	case errors.Is(err, lxdexec.ErrNotFound):
		return fmt.Errorf("path %q in project %q: %w", fp, proj.Name, errdefs.ErrNotFound)
	case errors.Is(err, lxdexec.ErrBadRequest):
		return errdefs.InvalidArgument("path %q in project %q: %v", fp, proj.Name, err)
	}
	return fmt.Errorf("files of project %q: %w", proj.Name, err)
}

// listFiles serves GET /v1/projects/{name}/files?path=: the directory's
// entries as LXD describes them without opening them (HEAD), at most
// maxListEntries, sorted by name. Without path it lists /workspace.
func (p *Projects) listFiles(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("path")
	if !r.URL.Query().Has("path") {
		raw = WorkspaceRoot
	}
	proj, dir, err := p.fileTarget(r, raw)
	if err != nil {
		return err
	}
	ctx := r.Context()
	info, err := p.o.Files.StatFile(ctx, proj.Container, dir)
	if err != nil {
		return fileError(proj, dir, err)
	}
	if info.Type != lxdexec.FileTypeDirectory {
		return errdefs.InvalidArgument("path %q: is a %s, not a directory (download it with GET /v1/projects/%s/files/raw)", dir, info.Type, proj.Name)
	}
	names, err := p.o.Files.ListDir(ctx, proj.Container, dir)
	if err != nil {
		return fileError(proj, dir, err)
	}
	slices.Sort(names)
	out := api.FileList{Path: dir, Entries: []api.FileEntry{}}
	if len(names) > maxListEntries {
		names, out.Truncated = names[:maxListEntries], true
	}
	entries := make([]*api.FileEntry, len(names))
	errs := make([]error, len(names))
	sem := make(chan struct{}, statParallel)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fi, err := p.o.Files.StatFile(ctx, proj.Container, path.Join(dir, name))
			if errors.Is(err, lxdexec.ErrNotFound) {
				return // gone since the listing
			}
			if err != nil {
				errs[i] = err
				return
			}
			entries[i] = &api.FileEntry{Name: name, Type: fi.Type, Mode: fmt.Sprintf("%04o", uint32(fi.Mode.Perm())),
				UID: fi.UID, GID: fi.GID, MTime: fi.ModTime.UTC()}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fileError(proj, dir, err)
	}
	for _, e := range entries {
		if e != nil {
			out.Entries = append(out.Entries, *e)
		}
	}
	return daemon.WriteJSON(w, http.StatusOK, out)
}

// downloadFile serves GET /v1/projects/{name}/files/raw?path=: the file's
// bytes streamed from LXD's answer (never held in memory), as an
// attachment.
func (p *Projects) downloadFile(w http.ResponseWriter, r *http.Request) error {
	proj, fp, err := p.fileTarget(r, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	opening := time.AfterFunc(p.o.PullOpenTimeout, cancel)
	body, info, err := p.o.Files.PullFile(ctx, proj.Container, fp)
	if !opening.Stop() {
		if body != nil {
			body.Close()
		}
		return &daemon.Error{Status: http.StatusGatewayTimeout, Code: api.CodeUnavailable,
			Message: fmt.Sprintf("path %q: LXD did not open it within %s (a FIFO or device?)", fp, p.o.PullOpenTimeout)}
	}
	if errors.Is(err, lxdexec.ErrIsDirectory) {
		return errdefs.InvalidArgument("path %q: is a directory (list it with GET /v1/projects/%s/files)", fp, proj.Name)
	}
	if err != nil {
		return fileError(proj, fp, err)
	}
	defer body.Close()
	if info.Type != lxdexec.FileTypeFile {
		return errdefs.InvalidArgument("path %q: is a %s, not a file", fp, info.Type)
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", attachment(path.Base(fp)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	if info.Size >= 0 {
		h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		// The status is sent: the short body (against Content-Length) is
		// what tells the client.
		p.log.Debug("download ended early", "project", proj.Name, "path", fp, "error", err)
	}
	return nil
}

// attachment is a Content-Disposition naming name as the download's file
// name; characters a header cannot carry become "_".
func attachment(name string) string {
	safe := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' || r == '/' {
			return '_'
		}
		return r
	}, name)
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": safe}); v != "" {
		return v
	}
	return "attachment"
}

// uploadFile serves PUT /v1/projects/{name}/files/raw?path=: the body,
// declared as application/octet-stream with its Content-Length, streamed
// into the file (created or replaced) owned by [projects] container_uid
// and container_gid. A body over [projects] max_upload_bytes is refused
// before anything is written; an upload that fails midway removes the
// partial file.
func (p *Projects) uploadFile(w http.ResponseWriter, r *http.Request) error {
	proj, fp, err := p.fileTarget(r, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	if fp == WorkspaceRoot {
		return errdefs.InvalidArgument("path %q: is the workspace itself; name a file under it", fp)
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/octet-stream" {
		return &daemon.Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeUnsupportedMediaType,
			Message: fmt.Sprintf("Content-Type %q is not accepted; send the file as Content-Type: application/octet-stream", r.Header.Get("Content-Type"))}
	}
	if r.ContentLength < 0 {
		return &daemon.Error{Status: http.StatusLengthRequired, Code: api.CodeBadRequest,
			Message: "an upload needs a Content-Length (the size is checked against [projects] max_upload_bytes before anything is written)"}
	}
	if limit := p.o.MaxUploadBytes; limit > 0 && r.ContentLength > limit {
		return &daemon.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeBadRequest,
			Message: fmt.Sprintf("upload of %d bytes is larger than %d bytes ([projects] max_upload_bytes)", r.ContentLength, limit)}
	}
	// A directory or a symlink is never replaced (nor, on a failed
	// upload, removed): only a file or a new name is written.
	if fi, err := p.o.Files.StatFile(r.Context(), proj.Container, fp); err == nil && fi.Type != lxdexec.FileTypeFile {
		return errdefs.InvalidArgument("path %q: is a %s; an upload writes files only", fp, fi.Type)
	} else if err != nil && !errors.Is(err, lxdexec.ErrNotFound) {
		return fileError(proj, fp, err)
	}
	// The server ends the body at Content-Length; a client that sends
	// less makes the read fail, and so the push.
	body := &countingReader{r: r.Body}
	err = p.o.Files.PushFile(r.Context(), proj.Container, fp, body,
		lxdexec.FileOptions{UID: p.o.FileUID, GID: p.o.FileGID})
	if err == nil && body.n != r.ContentLength {
		err = fmt.Errorf("upload ended after %d of %d bytes", body.n, r.ContentLength)
	}
	if err != nil {
		if body.n > 0 || !errors.Is(err, lxdexec.ErrNotFound) {
			// Nothing partial stays behind (LXD's file API cannot write
			// to a temporary name and rename it).
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
			if derr := p.o.Files.DeleteFile(cleanup, proj.Container, fp); derr != nil && !errors.Is(derr, lxdexec.ErrNotFound) {
				p.log.Warn("remove partial upload", "project", proj.Name, "path", fp, "error", derr)
			}
			cancel()
		}
		if errors.Is(err, lxdexec.ErrNotFound) {
			return fmt.Errorf("path %q in project %q: its directory: %w", fp, proj.Name, errdefs.ErrNotFound)
		}
		return fileError(proj, fp, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}
