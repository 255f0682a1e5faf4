package projectapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/internal/errdefs"
	"remote/lxdexec"
	"remote/providers/shim/fsop"
	"remote/provisioning"
)

// ContainerFS describes, reads and writes paths from inside a container,
// by lstat, opening regular files only (O_NOFOLLOW|O_NONBLOCK, then
// fstat) and writing through a new file renamed into place, in a process
// the context kills; *containerfs.ContainerFiles implements it. A refusal
// is an *fsop.Err. The file routes never use LXD's file API, whose
// host-side helper (forkfile, in LXD's own cgroup) opens what it is
// asked for and blocks for good on a FIFO the container's root put there.
type ContainerFS interface {
	Stat(ctx context.Context, instance, path string) (*fsop.Entry, error)
	List(ctx context.Context, instance, dir string, max int) ([]fsop.Entry, bool, error)
	Open(ctx context.Context, instance, path string) (io.ReadCloser, *fsop.Entry, error)
	Write(ctx context.Context, instance, path string, r io.Reader, size int64, uid, gid int) error
}

// WorkspaceRoot is the only directory the file routes reach.
const WorkspaceRoot = "/workspace"

// Bounds of the file routes.
const (
	maxFilePath    = 4096 // bytes of a path, as PATH_MAX
	maxListEntries = 1000 // entries one listing describes
	// Default bounds of file requests in flight (each one a process in the
	// container): per user and per project.
	defaultFileOpsPerUser    = 8
	defaultFileOpsPerProject = 4
)

// fileSlots counts the file requests in flight per user and per project.
type fileSlots struct {
	mu      sync.Mutex
	user    map[string]int
	project map[string]int
}

// takeFileSlot holds one slot of the project's and the caller's, or
// answers 429 (Retry-After: 1) naming the bound that is full: a page or a
// client cannot pile up processes in a container, nor hold more than a
// few open.
func (p *Projects) takeFileSlot(w http.ResponseWriter, r *http.Request, proj api.Project) (release func(), err error) {
	user := daemon.UserFrom(r.Context())
	s := &p.fileOps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.user == nil {
		s.user, s.project = map[string]int{}, map[string]int{}
	}
	full := func(what string, bound int) error {
		w.Header().Set("Retry-After", "1")
		return &daemon.Error{Status: http.StatusTooManyRequests, Code: api.CodeRateLimited,
			Message: fmt.Sprintf("too many file requests at once: %s has %d in flight, the most allowed; try again when one ends", what, bound)}
	}
	if n := s.project[proj.Name]; n >= p.o.MaxFileOpsPerProject {
		return nil, full(fmt.Sprintf("project %q", proj.Name), n)
	}
	if n := s.user[user]; n >= p.o.MaxFileOpsPerUser {
		return nil, full(fmt.Sprintf("user %q", user), n)
	}
	s.project[proj.Name]++
	s.user[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.project[proj.Name]--; s.project[proj.Name] <= 0 {
				delete(s.project, proj.Name)
			}
			if s.user[user]--; s.user[user] <= 0 {
				delete(s.user, user)
			}
		})
	}, nil
}

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
	if p.o.FS == nil {
		return api.Project{}, "", errdefs.Unavailable("file routes are off: the daemon has no remote-shim to run in containers ([agent] shim_binary)")
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

// fileError names the path in LXD's and remote-shim's answers: a
// missing path is a 404, a path of the wrong kind a 400; other failures
// keep their class.
func fileError(proj api.Project, fp string, err error) error {
	var fe *fsop.Err
	switch {
	case errors.Is(err, lxdexec.ErrNotFound), errors.As(err, &fe) && fe.Kind == fsop.KindNotFound:
		return fmt.Errorf("path %q in project %q: %w", fp, proj.Name, errdefs.ErrNotFound)
	case errors.Is(err, lxdexec.ErrBadRequest):
		return errdefs.InvalidArgument("path %q in project %q: %v", fp, proj.Name, err)
	case fe != nil && fe.Kind == fsop.KindWrongType:
		return errdefs.InvalidArgument("path %q in project %q: is a %s", fp, proj.Name, fe.Type)
	case fe != nil:
		return fmt.Errorf("path %q in project %q: %v", fp, proj.Name, fe.Message)
	}
	return fmt.Errorf("files of project %q: %w", proj.Name, err)
}

// listFiles serves GET /v1/projects/{name}/files?path=: the directory's
// entries as lstat describes them from inside the container (never
// opened: a FIFO is a "fifo"), at most maxListEntries, sorted by name.
// Without path it lists /workspace.
func (p *Projects) listFiles(w http.ResponseWriter, r *http.Request) error {
	raw := r.URL.Query().Get("path")
	if !r.URL.Query().Has("path") {
		raw = WorkspaceRoot
	}
	proj, dir, err := p.fileTarget(r, raw)
	if err != nil {
		return err
	}
	release, err := p.takeFileSlot(w, r, proj)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), p.o.PullOpenTimeout)
	defer cancel()
	es, truncated, err := p.o.FS.List(ctx, proj.Container, dir, maxListEntries)
	var fe *fsop.Err
	if errors.As(err, &fe) && fe.Kind == fsop.KindWrongType {
		return errdefs.InvalidArgument("path %q: is a %s, not a directory (download a file with GET /v1/projects/%s/files/raw)", dir, fe.Type, proj.Name)
	}
	if err != nil {
		if ctx.Err() != nil && r.Context().Err() == nil {
			return &daemon.Error{Status: http.StatusGatewayTimeout, Code: api.CodeUnavailable,
				Message: fmt.Sprintf("path %q: not listed within %s", dir, p.o.PullOpenTimeout)}
		}
		return fileError(proj, dir, err)
	}
	out := api.FileList{Path: dir, Entries: make([]api.FileEntry, 0, len(es)), Truncated: truncated}
	for _, e := range es {
		fe := api.FileEntry{Name: e.Name, Type: e.Type, Mode: fmt.Sprintf("%04o", e.Mode&0o777),
			UID: e.UID, GID: e.GID, MTime: e.MTime.UTC()}
		if e.Type == fsop.TypeFile {
			fe.Size = &e.Size
		}
		out.Entries = append(out.Entries, fe)
	}
	return daemon.WriteJSON(w, http.StatusOK, out)
}

// downloadFile serves GET /v1/projects/{name}/files/raw?path=: a regular
// file's bytes streamed from inside the container (never held in memory),
// as an attachment. Anything else (a FIFO, socket, device, directory or
// symlink) is refused without being opened, and a request a page makes
// for a sub-resource (Sec-Fetch-Dest: image, script, iframe...) is
// refused before anything runs.
func (p *Projects) downloadFile(w http.ResponseWriter, r *http.Request) error {
	if err := CheckDownloadDest(r.Header); err != nil {
		return err
	}
	proj, fp, err := p.fileTarget(r, r.URL.Query().Get("path"))
	if err != nil {
		return err
	}
	release, err := p.takeFileSlot(w, r, proj)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	// The deadline kills the process in the container that opens the
	// file (it cannot block on a FIFO: see fsop.Open).
	opening := time.AfterFunc(p.o.PullOpenTimeout, cancel)
	body, info, err := p.o.FS.Open(ctx, proj.Container, fp)
	if !opening.Stop() {
		if body != nil {
			body.Close()
		}
		return &daemon.Error{Status: http.StatusGatewayTimeout, Code: api.CodeUnavailable,
			Message: fmt.Sprintf("path %q: not opened within %s", fp, p.o.PullOpenTimeout)}
	}
	var fe *fsop.Err
	if errors.As(err, &fe) && fe.Kind == fsop.KindWrongType {
		hint := ""
		if fe.Type == fsop.TypeDirectory {
			hint = fmt.Sprintf(" (list it with GET /v1/projects/%s/files)", proj.Name)
		}
		return errdefs.InvalidArgument("path %q: is a %s, not a file: only regular files are downloaded%s", fp, fe.Type, hint)
	}
	if err != nil {
		return fileError(proj, fp, err)
	}
	defer body.Close()
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", attachment(path.Base(fp)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil {
		// The status is sent: the short body (against Content-Length) is
		// what tells the client.
		p.log.Debug("download ended early", "project", proj.Name, "path", fp, "error", err)
	}
	return nil
}

// CheckDownloadDest refuses a files/raw request a browser makes for a
// page's sub-resource: Sec-Fetch-Dest other than "document" (a link
// followed or a download), "empty" (fetch) or none (curl, remotectl), so
// Markdown in a chat (an image, a frame...) never makes a download run.
// remote-web checks it before proxying (it strips fetch metadata).
func CheckDownloadDest(h http.Header) error {
	if d := h.Get("Sec-Fetch-Dest"); !api.DownloadDestAllowed(d) {
		return &daemon.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
			Message: fmt.Sprintf("files/raw is a download, not a sub-resource: Sec-Fetch-Dest %q is refused (open the file as a link)", d)}
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
// from inside the container into a new file renamed over the path
// (created or replaced), owned by [projects] container_uid and
// container_gid. A body over [projects] max_upload_bytes is refused
// before anything is written; an upload that fails midway leaves the
// path as it was.
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
	release, err := p.takeFileSlot(w, r, proj)
	if err != nil {
		return err
	}
	defer release()
	// A directory, symlink, FIFO, socket or device is never replaced
	// (nor, on a failed upload, removed): only a file or a new name is
	// written. The lstat is from inside the container: LXD's HEAD calls a
	// FIFO a file, and LXD's write would then block opening it.
	sctx, scancel := context.WithTimeout(r.Context(), p.o.PullOpenTimeout)
	fi, err := p.o.FS.Stat(sctx, proj.Container, fp)
	scancel()
	var fe *fsop.Err
	if err == nil && fi.Type != fsop.TypeFile {
		return errdefs.InvalidArgument("path %q: is a %s; an upload writes regular files only", fp, fi.Type)
	} else if err != nil && !(errors.As(err, &fe) && fe.Kind == fsop.KindNotFound) {
		return fileError(proj, fp, err)
	}
	// The server ends the body at Content-Length; a client that sends
	// less makes the read fail, and so the write, which then removes its
	// temporary file: the file stays as it was.
	body := &countingReader{r: r.Body}
	err = p.o.FS.Write(r.Context(), proj.Container, fp, body, r.ContentLength, p.o.FileUID, p.o.FileGID)
	if err != nil {
		if errors.As(err, &fe) && fe.Kind == fsop.KindNotFound {
			return fmt.Errorf("path %q in project %q: its directory: %w", fp, proj.Name, errdefs.ErrNotFound)
		}
		if errors.As(err, &fe) && fe.Kind == fsop.KindWrongType {
			return errdefs.InvalidArgument("path %q: is a %s; an upload writes regular files only", fp, fe.Type)
		}
		if body.n != r.ContentLength {
			return fmt.Errorf("upload to %q in project %q ended after %d of %d bytes: %w", fp, proj.Name, body.n, r.ContentLength, err)
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
