// Package containerfs is the daemon's side of the project file routes:
// ContainerFiles describes and reads paths in a project container
// by running `remote-shim files` (package remote/providers/shim/fsop)
// inside it through LXD's exec, never through LXD's file API, whose
// host-side helper would open a FIFO or device the container's root put
// there and block on it in LXD's own cgroup.
//
// It imports lxdexec, providers/runner (the shim binary and where it
// goes in a container) and fsop; never the daemon.
package containerfs

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"remote/lxdexec"
	"remote/providers/runner"
	"remote/providers/shim/fsop"
)

// FilesLXD is what ContainerFiles needs of LXD; *lxdexec.Client (and the
// daemon's connection) implement it.
type FilesLXD interface {
	Exec(ctx context.Context, instance string, req lxdexec.ExecRequest) (*lxdexec.Exec, error)
	PushFile(ctx context.Context, instance, path string, content io.Reader, opts lxdexec.FileOptions) error
	DeleteFile(ctx context.Context, instance, path string) error
}

// ContainerFiles describes and reads paths in a project container for
// the file routes by running `remote-shim files` inside it (package
// remote/providers/shim/fsop), never through LXD's file API, whose
// host-side helper (forkfile, in LXD's cgroup) would open a FIFO or
// device the container's root put there and block on it for good. A
// stuck operation blocks in the container's own cgroup, in an exec the
// caller's context kills.
//
// The copy it runs is pushed to a fresh, unguessable name per container
// (and again whenever it cannot be run), so root in the container cannot
// plant a FIFO where LXD will write it; it never reads that copy back.
// Its integrity is not needed: it gets no secret, and what it answers
// (names, types, bytes of files) is what root in the container controls
// anyway.
type ContainerFiles struct {
	LXD  FilesLXD
	Shim *runner.ShimConfig

	mu      sync.Mutex
	helpers map[string]string // container → helper path there
	locks   map[string]*sync.Mutex
}

// helperExitGone are LXD's exit codes for a command it could not run
// (not executable: 126, e.g. a FIFO planted there; missing: 127).
func helperExitGone(code int) bool { return code == 126 || code == 127 }

func (c *ContainerFiles) lock(instance string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
		c.helpers = map[string]string{}
	}
	m := c.locks[instance]
	if m == nil {
		m = &sync.Mutex{}
		c.locks[instance] = m
	}
	return m
}

// helper returns the path of the helper in the container, pushing a new
// copy when there is none or stale names the one that failed.
func (c *ContainerFiles) helper(ctx context.Context, instance, stale string) (string, error) {
	if c.Shim == nil || c.Shim.Binary == "" {
		return "", fmt.Errorf("%w: no remote-shim binary configured for the file routes", runner.ErrLaunch)
	}
	mu := c.lock(instance)
	mu.Lock()
	defer mu.Unlock()
	c.mu.Lock()
	cur := c.helpers[instance]
	c.mu.Unlock()
	if cur != "" && cur != stale {
		return cur, nil
	}
	if cur != "" {
		// Unlinking opens nothing, whatever is there now.
		_ = c.LXD.DeleteFile(ctx, instance, cur)
	}
	d, err := c.Shim.Digest()
	if err != nil {
		return "", err
	}
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	p := path.Join(runner.ContainerShimDir, fsop.HelperPrefix+d+fsop.HelperMark+hex.EncodeToString(rnd[:]))
	// Each level once, errors ignored (it exists): lxdexec's Mkdir would
	// read a level back through LXD's file API to tell.
	dir := ""
	for _, part := range strings.Split(strings.TrimPrefix(runner.ContainerShimDir, "/"), "/") {
		dir += "/" + part
		_ = c.LXD.PushFile(ctx, instance, dir, nil, lxdexec.FileOptions{Type: lxdexec.FileTypeDirectory, Mode: 0o755})
	}
	f, err := os.Open(c.Shim.Binary)
	if err != nil {
		return "", fmt.Errorf("remote-shim binary: %w", err)
	}
	defer f.Close()
	if err := c.LXD.PushFile(ctx, instance, p, f, lxdexec.FileOptions{Mode: 0o755}); err != nil {
		return "", fmt.Errorf("push remote-shim for the file routes into %s: %w", instance, err)
	}
	c.mu.Lock()
	c.helpers[instance] = p
	c.mu.Unlock()
	// Earlier daemons' copies (one per start) go; best effort.
	if op, _, _, err := c.run(ctx, instance, p, []string{"prune", p}, nil); err == nil {
		_, _ = op.finish()
	}
	return p, nil
}

// filesOp is one running `remote-shim files` exec past its reply line.
type filesOp struct {
	ex     *lxdexec.Exec
	cancel context.CancelFunc
	out    *bufio.Reader
	reply  fsop.Reply
	errEnd chan struct{}
}

// close stops the exec (if it still runs) and reaps it in the background.
func (o *filesOp) close() {
	o.cancel()
	go func() {
		_, _ = io.Copy(io.Discard, o.out)
		<-o.errEnd
		_, _ = o.ex.Wait()
	}()
}

// start runs `remote-shim files args...` in the container and reads its
// reply line; a helper LXD cannot run is replaced once.
func (c *ContainerFiles) start(ctx context.Context, instance string, args ...string) (*filesOp, error) {
	stale := ""
	for try := 0; ; try++ {
		bin, err := c.helper(ctx, instance, stale)
		if err != nil {
			return nil, err
		}
		op, code, detail, err := c.run(ctx, instance, bin, args, nil)
		if err == nil {
			return op, nil
		}
		if helperExitGone(code) && try == 0 {
			stale = bin
			continue
		}
		if detail != "" {
			err = fmt.Errorf("%w: %s", err, detail)
		}
		return nil, fmt.Errorf("remote-shim files %s in %s: %w", args[0], instance, err)
	}
}

// run execs bin files args... and reads its reply line; stdin, when set,
// is copied to the exec's stdin meanwhile (else stdin is closed at once).
func (c *ContainerFiles) run(ctx context.Context, instance, bin string, args []string, stdin io.Reader) (*filesOp, int, string, error) {
	ectx, cancel := context.WithCancel(ctx)
	ex, err := c.LXD.Exec(ectx, instance, lxdexec.ExecRequest{Command: append([]string{bin, "files"}, args...), Cwd: "/", KillGrace: time.Second})
	if err != nil {
		cancel()
		return nil, 0, "", err
	}
	if stdin == nil {
		ex.Stdin().Close()
	} else {
		go func() {
			if _, err := io.Copy(ex.Stdin(), stdin); err != nil {
				// The helper then reads a short upload and removes
				// its temporary file; stop it now.
				cancel()
				return
			}
			ex.Stdin().Close()
		}()
	}
	op := &filesOp{ex: ex, cancel: cancel, out: bufio.NewReaderSize(ex.Stdout(), 64<<10), errEnd: make(chan struct{})}
	var stderr bytes.Buffer
	go func() {
		defer close(op.errEnd)
		_, _ = io.Copy(&stderr, io.LimitReader(ex.Stderr(), 4096))
		_, _ = io.Copy(io.Discard, ex.Stderr())
	}()
	line, lerr := readLine(op.out, fsop.MaxReplyLine)
	if lerr == nil {
		if err := json.Unmarshal(line, &op.reply); err != nil {
			lerr = fmt.Errorf("bad reply: %v", err)
		}
	}
	if lerr != nil {
		cancel()
		_, _ = io.Copy(io.Discard, op.out)
		<-op.errEnd
		code, _ := ex.Wait()
		if err := ctx.Err(); err != nil {
			return nil, code, "", err
		}
		return nil, code, strings.TrimSpace(stderr.String()), fmt.Errorf("exit %d: %w", code, lerr)
	}
	return op, 0, "", nil
}

// readLine reads one line of at most max bytes (without its newline).
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > max {
			return nil, fmt.Errorf("reply longer than %d bytes", max)
		}
		if err == nil {
			return buf[:len(buf)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

// finish reads the rest of a stat or list and reaps the exec; a refusal
// comes back as its *fsop.Err.
func (o *filesOp) finish() (fsop.Reply, error) {
	defer o.close()
	if o.reply.Error != nil {
		return o.reply, o.reply.Error
	}
	return o.reply, nil
}

// Stat describes p itself (a symlink is not followed); a refusal is an
// *fsop.Err (KindNotFound for a missing path).
func (c *ContainerFiles) Stat(ctx context.Context, instance, p string) (*fsop.Entry, error) {
	op, err := c.start(ctx, instance, "stat", p)
	if err != nil {
		return nil, err
	}
	r, err := op.finish()
	if err != nil {
		return nil, err
	}
	if r.Entry == nil {
		return nil, errors.New("remote-shim files stat: no entry in the reply")
	}
	return r.Entry, nil
}

// List describes the entries of directory dir, sorted by name, at most
// max; truncated tells there were more.
func (c *ContainerFiles) List(ctx context.Context, instance, dir string, max int) ([]fsop.Entry, bool, error) {
	op, err := c.start(ctx, instance, "list", dir, strconv.Itoa(max))
	if err != nil {
		return nil, false, err
	}
	r, err := op.finish()
	if err != nil {
		return nil, false, err
	}
	return r.Entries, r.Truncated, nil
}

// Write replaces or creates the regular file p with exactly size bytes
// of r, owned by uid:gid (see fsop.Write: a temporary file renamed over
// p, which is never opened; anything but a regular file at p is refused
// as an *fsop.Err of KindWrongType). It runs the helper a Stat just ran
// (a helper LXD cannot run fails the upload: r cannot be read twice).
// Cancelling ctx stops the write and removes the temporary file.
func (c *ContainerFiles) Write(ctx context.Context, instance, p string, r io.Reader, size int64, uid, gid int) error {
	if size < 0 || uid < 0 || gid < 0 {
		return fmt.Errorf("write %s: bad size %d or owner %d:%d", p, size, uid, gid)
	}
	bin, err := c.helper(ctx, instance, "")
	if err != nil {
		return err
	}
	op, _, detail, err := c.run(ctx, instance, bin, []string{"write", p, strconv.FormatInt(size, 10), strconv.Itoa(uid), strconv.Itoa(gid)}, r)
	if err != nil {
		if detail != "" {
			err = fmt.Errorf("%w: %s", err, detail)
		}
		return fmt.Errorf("remote-shim files write in %s: %w", instance, err)
	}
	_, err = op.finish()
	return err
}

// Open opens p for reading when it is a regular file (never opening
// anything else: see fsop.Open) and returns its bytes, at most the
// Entry's Size of them, as the exec streams them. Closing the reader
// stops the exec; so does cancelling ctx, which must outlive the read.
func (c *ContainerFiles) Open(ctx context.Context, instance, p string) (io.ReadCloser, *fsop.Entry, error) {
	op, err := c.start(ctx, instance, "read", p)
	if err != nil {
		return nil, nil, err
	}
	if op.reply.Error != nil {
		op.close()
		return nil, nil, op.reply.Error
	}
	if op.reply.Entry == nil || op.reply.Entry.Size < 0 {
		op.close()
		return nil, nil, errors.New("remote-shim files read: no entry in the reply")
	}
	return &fileReader{r: io.LimitReader(op.out, op.reply.Entry.Size), op: op}, op.reply.Entry, nil
}

type fileReader struct {
	r    io.Reader
	op   *filesOp
	once sync.Once
}

func (f *fileReader) Read(b []byte) (int, error) { return f.r.Read(b) }

func (f *fileReader) Close() error {
	f.once.Do(f.op.close)
	return nil
}
