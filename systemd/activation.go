package systemd

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// listenFDsStart is SD_LISTEN_FDS_START, the first passed descriptor.
const listenFDsStart = 3

// ErrActivation means the socket-activation environment names descriptors
// that are not what remoted.socket passes (one listening Unix stream socket).
var ErrActivation = errors.New("unusable socket activation")

// ActivatedListener returns the listening Unix socket systemd passed in
// (sd_listen_fds(3): $LISTEN_FDS descriptors from fd 3, for the process
// $LISTEN_PID), or nil, nil when the process was not socket-activated.
//
// The listener's dynamic type is *net.UnixListener. Closing it does not
// remove the socket file: the file belongs to systemd, which keeps
// listening on it across restarts. The descriptor is made close-on-exec and
// LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES are removed from the
// environment, so no child process inherits either. Any other passed
// descriptor set (several, not a socket, not listening, not a Unix stream
// socket) is an error wrapping ErrActivation.
func ActivatedListener() (net.Listener, error) {
	pidEnv, fdsEnv := os.Getenv(envListenPID), os.Getenv(envListenFDs)
	if fdsEnv == "" {
		return nil, nil
	}
	pid, err := strconv.Atoi(pidEnv)
	if err != nil || pid != os.Getpid() {
		return nil, nil // meant for another process (our parent, say)
	}
	defer unsetListenEnv()
	n, err := strconv.Atoi(fdsEnv)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: invalid %s %q", ErrActivation, envListenFDs, fdsEnv)
	}
	if n == 0 {
		return nil, nil
	}
	for fd := listenFDsStart; fd < listenFDsStart+n; fd++ {
		unix.CloseOnExec(fd)
	}
	if n != 1 {
		for fd := listenFDsStart + 1; fd < listenFDsStart+n; fd++ {
			unix.Close(fd)
		}
		unix.Close(listenFDsStart)
		return nil, fmt.Errorf("%w: %d descriptors passed, want 1", ErrActivation, n)
	}
	return unixListenerFromFD(listenFDsStart, fdName())
}

func unsetListenEnv() {
	for _, k := range []string{envListenPID, envListenFDs, envListenFDNames} {
		_ = os.Unsetenv(k) // never fails on Unix
	}
}

func fdName() string {
	name, _, _ := strings.Cut(os.Getenv(envListenFDNames), ":")
	if name == "" {
		return "LISTEN_FD_3"
	}
	return name
}

// unixListenerFromFD checks that fd is a listening Unix stream socket and
// wraps it. fd is consumed: closed on error, owned by the listener else.
func unixListenerFromFD(fd int, name string) (net.Listener, error) {
	f := os.NewFile(uintptr(fd), name)
	defer f.Close() // net.FileListener dups the descriptor
	if err := checkListening(fd); err != nil {
		return nil, fmt.Errorf("%w: fd %d (%s): %w", ErrActivation, fd, name, err)
	}
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("%w: fd %d (%s): %w", ErrActivation, fd, name, err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("%w: fd %d (%s) is a %s socket, want unix", ErrActivation, fd, name, l.Addr().Network())
	}
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// errNotListening and friends say what a passed descriptor is instead.
var (
	errNotListening = errors.New("socket is not listening")
	errNotStream    = errors.New("not a stream socket")
)

func checkListening(fd int) error {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("not a socket: %w", err)
	}
	if typ != unix.SOCK_STREAM {
		return errNotStream
	}
	acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("read SO_ACCEPTCONN: %w", err)
	}
	if acc == 0 {
		return errNotListening
	}
	return nil
}
