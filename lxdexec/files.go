package lxdexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// File types as LXD names them.
const (
	FileTypeFile      = "file"
	FileTypeDirectory = "directory"
	FileTypeSymlink   = "symlink"
)

// FileOptions describes a pushed file. Mode 0 leaves LXD's default (0644
// for files, 0750 for directories). Mode, UID and GID apply when the file
// is created; on servers with the instances_files_modify_permissions
// extension a non-zero Mode is also applied to an existing file, together
// with UID and GID.
type FileOptions struct {
	Mode     os.FileMode
	UID, GID int
	// Type is "file" (default), "directory" or "symlink" (content is then
	// the link target).
	Type string
	// MkdirParents creates missing parent directories (one level at a time,
	// with Mode 0755 and the same UID/GID) first.
	MkdirParents bool
	// Append appends to an existing file instead of replacing it; the file
	// must exist.
	Append bool
}

// FileInfo describes a pulled path.
type FileInfo struct {
	Mode    os.FileMode
	UID     int
	GID     int
	Type    string // "file", "directory" or "symlink"
	ModTime time.Time
	// Size is the content's length in bytes as LXD announced it
	// (Content-Length), or -1 when it did not (PullFile only).
	Size int64
}

// octalMode renders a mode the way LXD parses it: octal with a leading 0
// (without it, "640" is read as decimal).
func octalMode(m os.FileMode) string {
	v := uint32(m.Perm())
	if m&os.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&os.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&os.ModeSticky != 0 {
		v |= 0o1000
	}
	return "0" + strconv.FormatUint(uint64(v), 8)
}

// parseOctalMode parses LXD's X-LXD-Mode header ("0644").
func parseOctalMode(s string) (os.FileMode, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil || v > 0o7777 {
		return 0, fmt.Errorf("bad file mode %q: %w", s, ErrProtocol)
	}
	m := os.FileMode(v & 0o777)
	if v&0o4000 != 0 {
		m |= os.ModeSetuid
	}
	if v&0o2000 != 0 {
		m |= os.ModeSetgid
	}
	if v&0o1000 != 0 {
		m |= os.ModeSticky
	}
	return m, nil
}

func checkPath(p string) error {
	if !strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("lxd: file path %q: must be absolute: %w", p, ErrBadRequest)
	}
	return nil
}

func (c *Client) filePath(instance, p string) string {
	return c.instancePath(instance, "/files", url.Values{"path": {p}})
}

// PushFile writes content to path in the instance (running or stopped),
// streaming it. See FileOptions.
func (c *Client) PushFile(ctx context.Context, instance, p string, content io.Reader, opts FileOptions) error {
	if err := checkName(instance); err != nil {
		return err
	}
	if err := checkPath(p); err != nil {
		return err
	}
	typ := opts.Type
	switch typ {
	case "":
		typ = FileTypeFile
	case FileTypeFile, FileTypeDirectory, FileTypeSymlink:
	default:
		return fmt.Errorf("push %s to %q: bad file type %q: %w", p, instance, opts.Type, ErrBadRequest)
	}
	if opts.UID < 0 || opts.GID < 0 {
		return fmt.Errorf("push %s to %q: negative uid %d or gid %d: %w", p, instance, opts.UID, opts.GID, ErrBadRequest)
	}
	if opts.MkdirParents {
		if dir := path.Dir(path.Clean(p)); dir != "/" {
			if err := c.Mkdir(ctx, instance, dir, FileOptions{Mode: 0o755, UID: opts.UID, GID: opts.GID}); err != nil {
				return err
			}
		}
	}
	h := http.Header{}
	set := func(k, v string) { h.Set(c.hdr+k, v) }
	set("Type", typ)
	set("Uid", strconv.Itoa(opts.UID))
	set("Gid", strconv.Itoa(opts.GID))
	if opts.Mode != 0 {
		set("Mode", octalMode(opts.Mode))
		if c.HasExtension("instances_files_modify_permissions") {
			set("Modify-Perm", "mode,uid,gid")
		}
	}
	if opts.Append {
		set("Write", "append")
	} else {
		set("Write", "overwrite")
	}
	if content == nil || typ == FileTypeDirectory {
		content = http.NoBody
	}
	// octet-stream, always: a form-encoded body makes LXD write 0 bytes.
	if _, err := c.do(ctx, http.MethodPost, c.filePath(instance, p), content, "", "application/octet-stream", h); err != nil {
		return fmt.Errorf("push %s to %q: %w", p, instance, err)
	}
	return nil
}

// Mkdir creates path and its missing parents (like mkdir -p), one level
// at a time; existing directories are left as they are.
func (c *Client) Mkdir(ctx context.Context, instance, p string, opts FileOptions) error {
	if err := checkPath(p); err != nil {
		return err
	}
	opts.Type, opts.MkdirParents, opts.Append = FileTypeDirectory, false, false
	clean := path.Clean(p)
	cur := ""
	for _, part := range strings.Split(strings.TrimPrefix(clean, "/"), "/") {
		if part == "" {
			continue
		}
		cur += "/" + part
		if err := c.PushFile(ctx, instance, cur, nil, opts); err != nil {
			// A concurrent Mkdir of the same tree makes LXD's sftp mkdir
			// fail with "file exists" (500): a directory that is there now
			// is what was asked for.
			if c.isDir(ctx, instance, cur) {
				continue
			}
			return fmt.Errorf("mkdir %s: %w", p, err)
		}
	}
	return nil
}

// isDir reports whether p exists in the instance as a directory.
func (c *Client) isDir(ctx context.Context, instance, p string) bool {
	rc, info, err := c.PullFile(ctx, instance, p)
	if rc != nil {
		rc.Close()
	}
	return errors.Is(err, ErrIsDirectory) && info != nil && info.Type == FileTypeDirectory
}

// PullFile reads path from the instance. For a symlink the content is the
// link target. A directory returns its FileInfo and an error matching
// ErrIsDirectory (see ListDir). The caller closes the reader.
func (c *Client) PullFile(ctx context.Context, instance, p string) (io.ReadCloser, *FileInfo, error) {
	if err := checkName(instance); err != nil {
		return nil, nil, err
	}
	if err := checkPath(p); err != nil {
		return nil, nil, err
	}
	resp, err := c.send(ctx, http.MethodGet, c.filePath(instance, p), nil, "", "", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("pull %s from %q: %w", p, instance, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		_, derr := decodeResponse(http.MethodGet, "/1.0/instances/"+instance+"/files", resp.StatusCode, resp.Body)
		if derr == nil {
			derr = fmt.Errorf("http %d: %w", resp.StatusCode, ErrProtocol)
		}
		return nil, nil, fmt.Errorf("pull %s from %q: %w", p, instance, derr)
	}
	info, err := c.fileInfo(resp.Header)
	if err != nil {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("pull %s from %q: %w", p, instance, err)
	}
	info.Size = resp.ContentLength
	if info.Type == FileTypeDirectory {
		resp.Body.Close()
		return nil, info, fmt.Errorf("pull %s from %q: %w", p, instance, ErrIsDirectory)
	}
	return resp.Body, info, nil
}

// ListDir returns the entry names (unsorted) of a directory in the
// instance.
func (c *Client) ListDir(ctx context.Context, instance, p string) ([]string, error) {
	if err := checkName(instance); err != nil {
		return nil, err
	}
	if err := checkPath(p); err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, http.MethodGet, c.filePath(instance, p), nil, "", "", nil)
	if err != nil {
		return nil, fmt.Errorf("list %s in %q: %w", p, instance, err)
	}
	defer resp.Body.Close()
	if t := resp.Header.Get(c.hdr + "Type"); resp.StatusCode == http.StatusOK && t != FileTypeDirectory {
		return nil, fmt.Errorf("list %s in %q: is a %s, not a directory: %w", p, instance, t, ErrBadRequest)
	}
	r, err := decodeResponse(http.MethodGet, "/1.0/instances/"+instance+"/files", resp.StatusCode, resp.Body)
	if err != nil {
		return nil, fmt.Errorf("list %s in %q: %w", p, instance, err)
	}
	var names []string
	if err := json.Unmarshal(r.Metadata, &names); err != nil {
		return nil, fmt.Errorf("list %s in %q: %v: %w", p, instance, err, ErrProtocol)
	}
	return names, nil
}

// StatFile describes path in the instance without opening it (LXD's HEAD,
// API extension instance_file_head): type, mode, owner and modification
// time; Size is -1 (LXD's HEAD carries no length). A symlink is described
// itself, not its target. A missing path gives ErrNotFound.
func (c *Client) StatFile(ctx context.Context, instance, p string) (*FileInfo, error) {
	if err := checkName(instance); err != nil {
		return nil, err
	}
	if err := checkPath(p); err != nil {
		return nil, err
	}
	resp, err := c.send(ctx, http.MethodHead, c.filePath(instance, p), nil, "", "", nil)
	if err != nil {
		return nil, fmt.Errorf("stat %s in %q: %w", p, instance, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := &Error{Method: http.MethodHead, Path: "/1.0/instances/" + instance + "/files", StatusCode: resp.StatusCode, Message: http.StatusText(resp.StatusCode)}
		return nil, fmt.Errorf("stat %s in %q: %w", p, instance, err)
	}
	info, err := c.fileInfo(resp.Header)
	if err != nil {
		return nil, fmt.Errorf("stat %s in %q: %w", p, instance, err)
	}
	info.Size = -1
	return info, nil
}

func (c *Client) fileInfo(h http.Header) (*FileInfo, error) {
	get := func(k string) string { return h.Get(c.hdr + k) }
	info := &FileInfo{Type: get("Type")}
	if info.Type == "" {
		return nil, fmt.Errorf("no %sType header: %w", c.hdr, ErrProtocol)
	}
	var err error
	if v := get("Mode"); v != "" {
		if info.Mode, err = parseOctalMode(v); err != nil {
			return nil, err
		}
	}
	if info.UID, err = strconv.Atoi(nonEmpty(get("Uid"), "0")); err != nil {
		return nil, fmt.Errorf("bad uid header %q: %w", get("Uid"), ErrProtocol)
	}
	if info.GID, err = strconv.Atoi(nonEmpty(get("Gid"), "0")); err != nil {
		return nil, fmt.Errorf("bad gid header %q: %w", get("Gid"), ErrProtocol)
	}
	if v := get("Modified"); v != "" {
		if t, err := time.Parse("2006-01-02 15:04:05 -0700 MST", v); err == nil {
			info.ModTime = t
		}
	} else if v := h.Get("Last-Modified"); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			info.ModTime = t
		}
	}
	if info.Type == FileTypeSymlink {
		info.Mode |= os.ModeSymlink
	}
	if info.Type == FileTypeDirectory {
		info.Mode |= os.ModeDir
	}
	return info, nil
}

// DeleteFile removes a file, symlink or empty directory in the instance.
// A missing path gives ErrNotFound.
func (c *Client) DeleteFile(ctx context.Context, instance, p string) error {
	if err := checkName(instance); err != nil {
		return err
	}
	if err := checkPath(p); err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodDelete, c.filePath(instance, p), nil, "", "", nil); err != nil {
		return fmt.Errorf("delete %s in %q: %w", p, instance, err)
	}
	return nil
}
