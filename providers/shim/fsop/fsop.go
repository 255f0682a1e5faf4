// Package fsop is the in-container side of the project file routes
// (daemon/projectapi's files.go): `remote-shim files list|stat|read|write`
// describe, read and write paths in a container from inside it, so that
// LXD's host-side file helper (forkfile, in LXD's own cgroup) never opens
// a path the container's root can turn into a FIFO, a socket or a device.
// A write goes to a new temporary file (O_EXCL) renamed over the target,
// which is never opened.
//
// Every answer starts with one JSON line (Reply) on stdout; a read's
// bytes follow it. Paths are only lstat'ed before they are opened, and
// opened only when they are regular files, with O_NOFOLLOW|O_NONBLOCK,
// then checked again with fstat (a FIFO swapped in after the lstat opens
// without blocking and is refused). Whatever blocks, blocks in the
// container's own cgroup, in a process the daemon kills at its deadline.
//
// It holds the wire types both sides share and imports only the standard
// library and x/sys.
package fsop

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Types of an Entry.
const (
	TypeFile      = "file"
	TypeDirectory = "directory"
	TypeSymlink   = "symlink"
	TypeFIFO      = "fifo"
	TypeSocket    = "socket"
	TypeDevice    = "device"
)

// Error kinds of a Reply.
const (
	KindNotFound   = "not_found"  // no such path
	KindWrongType  = "wrong_type" // the path is not what the operation takes (Err.Type says what it is)
	KindPermission = "permission" // EACCES, EPERM
	KindOther      = "other"      // anything else
)

// Entry describes one path as lstat sees it.
type Entry struct {
	Name  string    `json:"name"`
	Type  string    `json:"type"`
	Mode  uint32    `json:"mode"` // permission bits
	UID   int       `json:"uid"`
	GID   int       `json:"gid"`
	MTime time.Time `json:"mtime"`
	Size  int64     `json:"size"` // a file's length; 0 for other types
}

// Err is a refused operation.
type Err struct {
	Kind    string `json:"kind"`
	Type    string `json:"type,omitempty"` // the path's type, for KindWrongType
	Message string `json:"message"`
}

func (e *Err) Error() string { return e.Message }

// Reply is the first line of every answer.
type Reply struct {
	Error     *Err    `json:"error,omitempty"`
	Entry     *Entry  `json:"entry,omitempty"`     // stat; read (the file opened)
	Entries   []Entry `json:"entries,omitempty"`   // list, sorted by name
	Truncated bool    `json:"truncated,omitempty"` // list: more entries than asked
}

// MaxReplyLine bounds the first line a daemon reads: 1000 entries of
// 255-byte names, escaped, fit.
const MaxReplyLine = 8 << 20

// TypeOf names a file mode's type.
func TypeOf(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDirectory
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	case m&fs.ModeNamedPipe != 0:
		return TypeFIFO
	case m&fs.ModeSocket != 0:
		return TypeSocket
	default:
		return TypeDevice
	}
}

func entryOf(name string, fi fs.FileInfo) Entry {
	e := Entry{Name: name, Type: TypeOf(fi.Mode()), Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UTC()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.UID, e.GID = int(st.Uid), int(st.Gid)
	}
	if e.Type == TypeFile {
		e.Size = fi.Size()
	}
	return e
}

func errOf(p string, err error) *Err {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return &Err{Kind: KindNotFound, Message: fmt.Sprintf("%s: no such file or directory", p)}
	case errors.Is(err, fs.ErrPermission):
		return &Err{Kind: KindPermission, Message: fmt.Sprintf("%s: permission denied", p)}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &Err{Kind: KindOther, Message: fmt.Sprintf("%s: %v", p, err)}
}

func wrongType(p, typ, want string) *Err {
	return &Err{Kind: KindWrongType, Type: typ, Message: fmt.Sprintf("%s: is a %s, not a %s", p, typ, want)}
}

// Stat describes p itself (a symlink is not followed).
func Stat(p string) (*Entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, errOf(p, err)
	}
	e := entryOf(filepath.Base(p), fi)
	return &e, nil
}

// List describes the entries of directory dir (lstat each), sorted by
// name, the first max of them; truncated tells there were more. A dir
// that is not a directory (a symlink to one included) is a KindWrongType.
func List(dir string, max int) ([]Entry, bool, error) {
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, false, errOf(dir, err)
	}
	if !fi.IsDir() {
		return nil, false, wrongType(dir, TypeOf(fi.Mode()), TypeDirectory)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, errOf(dir, &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, false, errOf(dir, err)
	}
	slices.Sort(names)
	truncated := false
	if max >= 0 && len(names) > max {
		names, truncated = names[:max], true
	}
	out := make([]Entry, 0, len(names))
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone since the listing
		}
		out = append(out, entryOfStat(n, &st))
	}
	return out, truncated, nil
}

func entryOfStat(name string, st *unix.Stat_t) Entry {
	var m fs.FileMode
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		m = fs.ModeDir
	case unix.S_IFLNK:
		m = fs.ModeSymlink
	case unix.S_IFIFO:
		m = fs.ModeNamedPipe
	case unix.S_IFSOCK:
		m = fs.ModeSocket
	default:
		m = fs.ModeDevice
	}
	e := Entry{Name: name, Type: TypeOf(m), Mode: st.Mode & 0o777, UID: int(st.Uid), GID: int(st.Gid),
		MTime: time.Unix(st.Mtim.Unix()).UTC()}
	if e.Type == TypeFile {
		e.Size = st.Size
	}
	return e
}

// afterLstat, when set (tests), runs between Open's lstat and its open.
var afterLstat func(p string)

// Open opens p for reading only when it is a regular file: an lstat
// first (a FIFO, socket, device, directory or symlink is never opened),
// then an open with O_NOFOLLOW|O_NONBLOCK (a FIFO swapped in meanwhile
// opens without waiting for a writer) and an fstat that must still say
// regular file.
func Open(p string) (*os.File, *Entry, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, nil, errOf(p, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, wrongType(p, TypeOf(fi.Mode()), TypeFile)
	}
	if afterLstat != nil {
		afterLstat(p)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, nil, wrongType(p, TypeSymlink, TypeFile)
	}
	if err != nil {
		return nil, nil, errOf(p, &fs.PathError{Op: "open", Path: p, Err: err})
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, nil, errOf(p, err)
	}
	e := entryOfStat(filepath.Base(p), &st)
	if e.Type != TypeFile {
		unix.Close(fd)
		return nil, nil, wrongType(p, e.Type, TypeFile)
	}
	return os.NewFile(uintptr(fd), p), &e, nil
}

// uploadPrefix names an upload's temporary file, next to its target.
const uploadPrefix = ".remote-upload-"

// Write replaces (or creates) the regular file p with exactly size bytes
// of r, owned by uid:gid, mode 0644: written to a new temporary file in
// p's directory (O_CREAT|O_EXCL|O_NOFOLLOW: nothing existing is opened)
// and renamed over p, so p is never opened either, a reader never sees a
// partial file and an upload that breaks off leaves p as it was. A p
// that exists as anything but a regular file is refused (KindWrongType),
// before and after the copy. done, when set, runs once the temporary
// file exists with the function removing it (for a signal handler).
func Write(p string, size int64, uid, gid int, r io.Reader, done func(remove func())) (*Entry, error) {
	check := func() error {
		fi, err := os.Lstat(p)
		if err == nil && !fi.Mode().IsRegular() {
			return wrongType(p, TypeOf(fi.Mode()), TypeFile)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return errOf(p, err)
		}
		return nil
	}
	if err := check(); err != nil {
		return nil, err
	}
	dir := filepath.Dir(p)
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, err
	}
	tmp := filepath.Join(dir, uploadPrefix+hex.EncodeToString(rnd[:]))
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, errOf(dir, &fs.PathError{Op: "create", Path: tmp, Err: err})
	}
	f := os.NewFile(uintptr(fd), tmp)
	remove := func() { _ = os.Remove(tmp) }
	if done != nil {
		done(remove)
	}
	fail := func(err error) (*Entry, error) {
		f.Close()
		remove()
		return nil, err
	}
	if err := f.Chown(uid, gid); err != nil {
		return fail(errOf(p, err))
	}
	if err := f.Chmod(0o644); err != nil {
		return fail(errOf(p, err))
	}
	n, err := io.CopyN(f, r, size)
	if err != nil {
		return fail(&Err{Kind: KindOther, Message: fmt.Sprintf("%s: upload ended after %d of %d bytes: %v", p, n, size, err)})
	}
	if err := f.Close(); err != nil {
		remove()
		return nil, errOf(p, err)
	}
	if err := check(); err != nil {
		remove()
		return nil, err
	}
	if err := os.Rename(tmp, p); err != nil {
		remove()
		return nil, errOf(p, err)
	}
	return Stat(p)
}

// HelperPrefix and HelperMark name the copies of remote-shim the daemon
// pushes for the file routes: remote-shim-<digest>.files-<random>.
const (
	HelperPrefix = "remote-shim-"
	HelperMark   = ".files-"
)

// Prune unlinks the other copies for the file routes in self's directory
// (earlier daemons' copies; self is the running one): names only, by
// unlink, which opens nothing. It returns how many it removed.
func Prune(self string) (int, error) {
	dir, me := filepath.Split(self)
	names, err := readNames(dir)
	if err != nil {
		return 0, errOf(dir, err)
	}
	n := 0
	for _, name := range names {
		if name == me || !strings.HasPrefix(name, HelperPrefix) || !strings.Contains(name, HelperMark) {
			continue
		}
		if err := unix.Unlinkat(unix.AT_FDCWD, filepath.Join(dir, name), 0); err == nil {
			n++
		}
	}
	return n, nil
}

func readNames(dir string) ([]string, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	return d.Readdirnames(-1)
}

// WriteReply writes r as the answer's first line.
func WriteReply(w io.Writer, r Reply) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReplyOf turns an operation's error into a Reply.
func ReplyOf(err error) Reply {
	var e *Err
	if !errors.As(err, &e) {
		e = &Err{Kind: KindOther, Message: err.Error()}
	}
	return Reply{Error: e}
}

// Serve runs one operation for remote-shim's `files` command: args are
// "stat PATH", "list DIR MAX", "read PATH", "write PATH SIZE UID GID"
// (the content on stdin) or "prune SELF" (see Prune). It writes the answer to stdout and returns the
// process's exit code (0 done, 1 refused, 2 bad arguments).
func Serve(args []string, stdin io.Reader, stdout io.Writer) int {
	fail := func(err error) int {
		_ = WriteReply(stdout, ReplyOf(err))
		return 1
	}
	if len(args) < 2 || !filepath.IsAbs(args[1]) {
		_ = WriteReply(stdout, Reply{Error: &Err{Kind: KindOther, Message: "usage: files stat|list|read|write|prune ABSOLUTE-PATH [MAX | SIZE UID GID]"}})
		return 2
	}
	p := args[1]
	switch {
	case args[0] == "stat" && len(args) == 2:
		e, err := Stat(p)
		if err != nil {
			return fail(err)
		}
		_ = WriteReply(stdout, Reply{Entry: e})
	case args[0] == "list" && len(args) == 3:
		var max int
		if _, err := fmt.Sscan(args[2], &max); err != nil {
			return fail(fmt.Errorf("list: bad MAX %q", args[2]))
		}
		es, truncated, err := List(p, max)
		if err != nil {
			return fail(err)
		}
		if es == nil {
			es = []Entry{}
		}
		_ = WriteReply(stdout, Reply{Entries: es, Truncated: truncated})
	case args[0] == "read" && len(args) == 2:
		f, e, err := Open(p)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if err := WriteReply(stdout, Reply{Entry: e}); err != nil {
			return 1
		}
		// Exactly the size announced: a file that grows is cut, one that
		// shrinks ends short (the daemon's Content-Length tells).
		if _, err := io.CopyN(stdout, f, e.Size); err != nil {
			return 1
		}
	case args[0] == "prune" && len(args) == 2:
		if _, err := Prune(p); err != nil {
			return fail(err)
		}
		_ = WriteReply(stdout, Reply{})
	case args[0] == "write" && len(args) == 5:
		var size int64
		var uid, gid int
		if _, err := fmt.Sscan(args[2], &size); err != nil || size < 0 {
			return fail(fmt.Errorf("write: bad SIZE %q", args[2]))
		}
		if _, err := fmt.Sscan(args[3], &uid); err != nil || uid < 0 {
			return fail(fmt.Errorf("write: bad UID %q", args[3]))
		}
		if _, err := fmt.Sscan(args[4], &gid); err != nil || gid < 0 {
			return fail(fmt.Errorf("write: bad GID %q", args[4]))
		}
		// Killed (SIGTERM: the daemon's deadline, a client gone), the
		// temporary file goes too.
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
		defer signal.Stop(sigs)
		e, err := Write(p, size, uid, gid, stdin, func(remove func()) {
			go func() {
				<-sigs
				remove()
				os.Exit(1)
			}()
		})
		if err != nil {
			return fail(err)
		}
		_ = WriteReply(stdout, Reply{Entry: e})
	default:
		_ = WriteReply(stdout, Reply{Error: &Err{Kind: KindOther, Message: fmt.Sprintf("files: unknown operation %q with %d arguments", args[0], len(args)-1)}})
		return 2
	}
	return 0
}
