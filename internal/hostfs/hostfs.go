// Package hostfs does the daemon's host-side file work on behalf of a host
// user: reading the user's credential files, writing them back, checking a
// loose chat's working directory, reading the operator's instruction and
// skill trees. Every path is resolved with openat2 beneath an expected root
// with no symlinks, no magic links and no "..", so a link the user plants
// cannot send root elsewhere; files must be regular, size-bounded and (when
// the daemon is root) owned by the expected owner. User work runs on a
// locked OS thread whose filesystem uid and gid are the user's, so the
// kernel answers with that user's rights; writes are atomic (temporary file
// in the same directory, then renameat), keep the replaced file's owner and
// mode, and never set a modification time in the future.
package hostfs

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrUnsafe means a path or file was refused: a symlink on the way, not a
// regular file or directory, the wrong owner, or too large. Its message
// names the path and the reason, never the content.
var ErrUnsafe = errors.New("refused host file")

// User is whose rights host file work runs with: a filesystem uid and gid
// and no supplementary groups (what agents run with, see runner/host.go).
type User struct {
	UID, GID uint32
}

// switches reports whether work for u needs the thread's filesystem
// credentials changed: only a root daemon acts for another user.
func (u User) switches() bool { return unix.Geteuid() == 0 && (u.UID != 0 || u.GID != 0) }

// Do runs fn with u's filesystem rights. When the daemon is root and u is
// not, fn runs on a dedicated, locked OS thread whose fsuid and fsgid are
// u's and whose supplementary groups are empty; the thread is restored
// afterwards or, when that fails, discarded (the goroutine exits locked).
// Otherwise fn runs as the daemon.
func (u User) Do(fn func() error) error {
	if !u.switches() {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		groups, err := unix.Getgroups()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("act as uid %d: %w", u.UID, err)
			return
		}
		gid0 := unix.Getegid()
		if err := enter(u); err != nil {
			if restore(groups, gid0) == nil {
				runtime.UnlockOSThread()
			}
			done <- fmt.Errorf("act as uid %d: %w", u.UID, err)
			return
		}
		ferr := fn()
		if restore(groups, gid0) == nil {
			runtime.UnlockOSThread()
		} // else: the thread dies with this goroutine
		done <- ferr
	}()
	return <-done
}

func setgroups(gids []int) error {
	var p *uint32
	g := make([]uint32, len(gids))
	for i, v := range gids {
		g[i] = uint32(v)
	}
	if len(g) > 0 {
		p = &g[0]
	}
	// The raw system call changes only this thread, unlike unix.Setgroups
	// through the C library semantics Go emulates for all threads.
	_, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(g)), uintptr(unsafe.Pointer(p)), 0)
	if e != 0 {
		return e
	}
	return nil
}

func setfsid(nr uintptr, id uint32) uint32 {
	r, _, _ := unix.RawSyscall(nr, uintptr(id), 0, 0)
	return uint32(r)
}

// enter switches this thread to u's filesystem identity and checks that
// the kernel took it (setfsuid reports no errors, only the previous id).
func enter(u User) error {
	if err := setgroups(nil); err != nil {
		return err
	}
	setfsid(unix.SYS_SETFSGID, u.GID)
	setfsid(unix.SYS_SETFSUID, u.UID)
	if setfsid(unix.SYS_SETFSGID, u.GID) != u.GID || setfsid(unix.SYS_SETFSUID, u.UID) != u.UID {
		return errors.New("setfsuid/setfsgid not permitted")
	}
	return nil
}

func restore(groups []int, gid int) error {
	setfsid(unix.SYS_SETFSUID, 0)
	setfsid(unix.SYS_SETFSGID, uint32(gid))
	if setfsid(unix.SYS_SETFSUID, 0) != 0 || setfsid(unix.SYS_SETFSGID, uint32(gid)) != uint32(gid) {
		return errors.New("restore filesystem ids")
	}
	return setgroups(groups)
}

// Root is a directory files are resolved beneath, with the rights of User
// and, when the daemon is root and Owner is not -1, the uid every file
// (and every directory written into) must belong to.
type Root struct {
	Dir   string // absolute; opened as given (it is the operator's choice)
	User  User
	Owner int64 // required owner uid when the daemon is root; -1 any; OwnerOfDir
}

// OwnerOfDir as Root.Owner requires every file to belong to whoever owns
// Dir (an operator's tree: a file linked in by someone else is refused).
const OwnerOfDir = -2

// resolveFlags: no symlink anywhere, no escape above the root.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Split returns the root and the relative path of p: beneath base when p
// lies inside it, else beneath "/".
func Split(base, p string) (root, rel string) {
	p = path.Clean(p)
	if base != "" {
		b := path.Clean(base)
		if strings.HasPrefix(p, strings.TrimSuffix(b, "/")+"/") {
			return b, strings.TrimPrefix(p, strings.TrimSuffix(b, "/")+"/")
		}
	}
	return "/", strings.TrimPrefix(p, "/")
}

func (r *Root) openRoot() (int, error) {
	fd, err := unix.Open(r.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &fs.PathError{Op: "open", Path: r.Dir, Err: err}
	}
	if r.Owner == OwnerOfDir {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, &fs.PathError{Op: "stat", Path: r.Dir, Err: err}
		}
		r.Owner = int64(st.Uid)
	}
	return fd, nil
}

// openat resolves rel beneath dirfd; a symlink on the way is ErrUnsafe.
// It uses openat2 (RESOLVE_BENEATH, no symlinks); where openat2 answers
// ENOSYS — systemd's RestrictSUIDSGID= filter does, as it cannot read the
// mode inside openat2's struct — it walks rel one component at a time
// with O_NOFOLLOW instead, with the same refusals.
func (r Root) openat(dirfd int, rel string, flags uint64, mode uint64) (int, error) {
	var fd int
	var err error
	if noOpenat2.Load() {
		fd, err = openBeneath(dirfd, rel, int(flags|unix.O_CLOEXEC), uint32(mode))
	} else {
		fd, err = unix.Openat2(dirfd, rel, &unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Mode: mode, Resolve: resolveFlags})
		if errors.Is(err, unix.ENOSYS) {
			noOpenat2.Store(true)
			return r.openat(dirfd, rel, flags, mode)
		}
	}
	switch {
	case err == nil:
		return fd, nil
	case errors.Is(err, unix.ELOOP):
		return -1, fmt.Errorf("%s: %w: a symbolic link on the way", path.Join(r.Dir, rel), ErrUnsafe)
	case errors.Is(err, unix.EXDEV):
		return -1, fmt.Errorf("%s: %w: leaves %s", path.Join(r.Dir, rel), ErrUnsafe, r.Dir)
	}
	return -1, &fs.PathError{Op: "open", Path: path.Join(r.Dir, rel), Err: err}
}

// noOpenat2 is set once openat2 answered ENOSYS (a seccomp filter).
var noOpenat2 atomic.Bool

// openBeneath is openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS done by
// hand: every directory on the way opened O_PATH|O_NOFOLLOW|O_DIRECTORY
// from the one before, the last component opened with O_NOFOLLOW. A
// symlink anywhere (magic links included) is ELOOP, an absolute path or a
// ".." is EXDEV, as openat2 answers.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	if strings.HasPrefix(rel, "/") {
		return -1, unix.EXDEV
	}
	var comps []string
	for _, c := range strings.Split(rel, "/") {
		switch c {
		case "", ".":
		case "..":
			return -1, unix.EXDEV
		default:
			comps = append(comps, c)
		}
	}
	if len(comps) == 0 {
		comps = []string{"."}
	}
	cur, err := unix.Dup(dirfd)
	if err != nil {
		return -1, err
	}
	for i, c := range comps {
		last := i == len(comps)-1
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags | unix.O_NOFOLLOW
		}
		next, err := unix.Openat(cur, c, f, mode)
		if err != nil && (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) {
			// A symlink where a directory (or the file) was asked for.
			var st unix.Stat_t
			if unix.Fstatat(cur, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				err = unix.ELOOP
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		if last && flags&unix.O_PATH != 0 {
			// O_PATH|O_NOFOLLOW opens a symlink itself: refuse it.
			var st unix.Stat_t
			if err := unix.Fstat(next, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFLNK {
				unix.Close(next)
				return -1, cmp.Or(err, error(unix.ELOOP))
			}
		}
		cur = next
	}
	return cur, nil
}

func (r Root) checkOwner(p string, st *unix.Stat_t) error {
	if r.Owner < 0 || unix.Geteuid() != 0 || int64(st.Uid) == r.Owner {
		return nil
	}
	return fmt.Errorf("%s: %w: owned by uid %d, not uid %d", p, ErrUnsafe, st.Uid, r.Owner)
}

// ReadFile reads rel beneath the root: a regular file of at most limit
// bytes owned by the root's owner. A missing file is fs.ErrNotExist.
func (r Root) ReadFile(rel string, limit int64) ([]byte, error) {
	var out []byte
	err := r.User.Do(func() error {
		rootfd, err := r.openRoot()
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		b, err := r.readAt(rootfd, rel, limit)
		out = b
		return err
	})
	return out, err
}

func (r Root) readAt(rootfd int, rel string, limit int64) ([]byte, error) {
	p := path.Join(r.Dir, rel)
	// O_NONBLOCK: a FIFO opens without waiting and is then refused.
	fd, err := r.openat(rootfd, rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: p, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: %w: not a regular file", p, ErrUnsafe)
	}
	if err := r.checkOwner(p, &st); err != nil {
		return nil, err
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", p, ErrUnsafe, limit)
	}
	buf := make([]byte, 0, st.Size)
	chunk := make([]byte, 32<<10)
	for {
		n, err := unix.Read(fd, chunk)
		if n > 0 {
			buf = append(buf, chunk[:n]...)
			if int64(len(buf)) > limit {
				return nil, fmt.Errorf("%s: %w: larger than %d bytes", p, ErrUnsafe, limit)
			}
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
	}
}

// Entry is one regular file of a tree read by ReadTree.
type Entry struct {
	Rel     string // slash-separated, relative to the tree's root
	Content []byte
	Mode    fs.FileMode // permission bits
}

// ReadTree reads every regular file beneath rel (recursively, in name
// order), each at most limit bytes. Symlinks, devices, FIFOs and sockets
// are skipped; a file or directory of the wrong owner is an error.
func (r Root) ReadTree(rel string, limit int64) ([]Entry, error) {
	var out []Entry
	err := r.User.Do(func() error {
		rootfd, err := r.openRoot()
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		return r.walk(rootfd, rel, "", limit, &out, 0)
	})
	return out, err
}

// List returns the names of the entries of directory rel beneath the root
// that are regular files (dirs false) or directories (dirs true), in name
// order; symlinks and everything else are left out. A missing directory
// is fs.ErrNotExist.
func (r Root) List(rel string, dirs bool) ([]string, error) {
	var out []string
	err := r.User.Do(func() error {
		rootfd, err := r.openRoot()
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		fd, err := r.openat(rootfd, path.Join(".", rel), unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return err
		}
		names, err := readDirNames(fd)
		defer unix.Close(fd)
		if err != nil {
			return err
		}
		want := uint32(unix.S_IFREG)
		if dirs {
			want = unix.S_IFDIR
		}
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == want {
				out = append(out, name)
			}
		}
		return nil
	})
	return out, err
}

func (r Root) walk(rootfd int, base, sub string, limit int64, out *[]Entry, depth int) error {
	if depth > 32 {
		return fmt.Errorf("%s: %w: nested too deeply", path.Join(r.Dir, base, sub), ErrUnsafe)
	}
	dirRel := path.Join(".", base, sub)
	fd, err := r.openat(rootfd, dirRel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return err
	}
	if err := r.checkOwner(path.Join(r.Dir, dirRel), &st); err != nil {
		unix.Close(fd)
		return err
	}
	defer unix.Close(fd)
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("list %s: %w", path.Join(r.Dir, dirRel), err)
	}
	for _, name := range names {
		var lst unix.Stat_t
		if err := unix.Fstatat(fd, name, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		switch lst.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if err := r.walk(rootfd, base, path.Join(sub, name), limit, out, depth+1); err != nil {
				return err
			}
		case unix.S_IFREG:
			b, err := r.readAt(rootfd, path.Join(dirRel, name), limit)
			if err != nil {
				return err
			}
			*out = append(*out, Entry{Rel: path.Join(sub, name), Content: b, Mode: fs.FileMode(lst.Mode & 0o777)})
		}
	}
	return nil
}

// WriteFile atomically replaces rel beneath the root with b: a temporary
// file in the same directory (opened through the safe directory fd), then
// renameat. The replaced file's mode (and its group, where the user may
// keep it) is kept; a new file is 0600. Missing directories are created
// 0700. The modification time is mtime, clamped to now; zero means now.
// Everything runs with the root's user's rights, so the file belongs to
// that user.
func (r Root) WriteFile(rel string, b []byte, mtime time.Time) error {
	return r.User.Do(func() error {
		rootfd, err := r.openRoot()
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		dir, name := path.Split(rel)
		dirfd, err := r.mkdirs(rootfd, strings.TrimSuffix(dir, "/"))
		if err != nil {
			return err
		}
		defer unix.Close(dirfd)
		p := path.Join(r.Dir, rel)
		mode, gid := uint32(0o600), -1
		if fd, err := r.openat(dirfd, name, unix.O_PATH, 0); err == nil {
			var st unix.Stat_t
			serr := unix.Fstat(fd, &st)
			unix.Close(fd)
			if serr != nil {
				return &fs.PathError{Op: "stat", Path: p, Err: serr}
			}
			if st.Mode&unix.S_IFMT != unix.S_IFREG {
				return fmt.Errorf("%s: %w: not a regular file", p, ErrUnsafe)
			}
			if err := r.checkOwner(p, &st); err != nil {
				return err
			}
			mode, gid = st.Mode&0o7777&^(unix.S_ISUID|unix.S_ISGID), int(st.Gid)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		tmp := "." + name + ".tmp-" + randomSuffix()
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return &fs.PathError{Op: "create", Path: path.Join(path.Dir(p), tmp), Err: err}
		}
		committed := false
		defer func() {
			if !committed {
				_ = unix.Unlinkat(dirfd, tmp, 0)
			}
		}()
		werr := writeAll(fd, b)
		if werr == nil && gid >= 0 {
			_ = unix.Fchown(fd, -1, gid) // best effort: the user may not be in that group
		}
		if werr == nil {
			werr = unix.Fchmod(fd, mode)
		}
		if werr == nil {
			now := time.Now()
			if mtime.IsZero() || mtime.After(now) {
				mtime = now
			}
			ts := []unix.Timespec{unix.NsecToTimespec(now.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
			werr = unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
		}
		if werr == nil {
			werr = unix.Fsync(fd)
		}
		if cerr := unix.Close(fd); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return &fs.PathError{Op: "write", Path: p, Err: werr}
		}
		if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
			return &fs.PathError{Op: "rename", Path: p, Err: err}
		}
		committed = true
		_ = unix.Fsync(dirfd)
		return nil
	})
}

// mkdirs opens dir beneath rootfd, creating missing components 0700, and
// checks that the directory belongs to the root's owner.
func (r Root) mkdirs(rootfd int, dir string) (int, error) {
	cur, err := unix.Dup(rootfd)
	if err != nil {
		return -1, err
	}
	done := ""
	for _, comp := range strings.Split(dir, "/") {
		if comp == "" || comp == "." {
			continue
		}
		done = path.Join(done, comp)
		next, err := r.openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			if merr := unix.Mkdirat(cur, comp, 0o700); merr != nil && merr != unix.EEXIST {
				unix.Close(cur)
				return -1, &fs.PathError{Op: "mkdir", Path: path.Join(r.Dir, done), Err: merr}
			}
			next, err = r.openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		unix.Close(cur)
		return -1, err
	}
	if err := r.checkOwner(path.Join(r.Dir, dir), &st); err != nil {
		unix.Close(cur)
		return -1, err
	}
	return cur, nil
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ModTime returns the modification time of rel beneath the root (no
// symlinks followed); a missing file is fs.ErrNotExist.
func (r Root) ModTime(rel string) (time.Time, error) {
	st, err := r.stat(rel)
	if err != nil {
		return time.Time{}, err
	}
	return time.Unix(st.Mtim.Unix()), nil
}

// stat is fstat of rel beneath the root, reached without symlinks, done
// with the user's rights.
func (r Root) stat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := r.User.Do(func() error {
		rootfd, err := r.openRoot()
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		fd, err := r.openat(rootfd, rel, unix.O_PATH, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fstat(fd, &st)
	})
	return st, err
}

// EnterDir reports whether user can enter the directory p (every
// component searchable with the user's rights, symlinks followed as the
// user's own kernel lookups would) and returns its real path. Any failure
// is one error, so the answer tells nothing about paths the user cannot
// reach.
func (u User) EnterDir(p string) (string, error) {
	var real string
	err := u.Do(func() error {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		// Looking up "." needs search permission on the directory itself.
		dot, err := unix.Openat(fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		unix.Close(dot)
		buf := make([]byte, 4096)
		n, err := unix.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd), buf)
		if err != nil {
			return err
		}
		real = string(buf[:n])
		return nil
	})
	if err != nil {
		return "", errors.New("not an enterable directory")
	}
	return real, nil
}

func readDirNames(fd int) ([]string, error) {
	dfd, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dfd), "dir")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// IsFile reports whether rel beneath the root is a regular file of the
// expected owner, reached without symlinks.
func (r Root) IsFile(rel string) bool {
	st, err := r.stat(rel)
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	return r.checkOwner(path.Join(r.Dir, rel), &st) == nil
}
