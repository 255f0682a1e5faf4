package shim

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Versions of the wire protocol a hello carries. A shim speaks every
// version from MinProtocolVersion to ProtocolVersion, so a daemon started
// after an upgrade still attaches to the runs of older shims, and an older
// daemon to a newer shim's. Version 2 adds spool runs (Spec.Spool): the
// CLI writes straight into its spool files and the client reads them
// itself (spool.go); a version 1 client gets a spool run's output as
// frames read from those files.
const (
	ProtocolVersion    = 2
	MinProtocolVersion = 1
)

// Run directory entries.
const (
	SocketName = "shim.sock"
	StdoutName = "stdout"
	StderrName = "stderr"
	ExitName   = "exit"
	PIDName    = "pid"
)

// Limits of the protocol.
const (
	MaxHello = 1 << 20  // longest hello or info line, newline included
	MaxFrame = 1 << 20  // largest frame payload
	chunk    = 64 << 10 // spool bytes sent per output frame
)

// Frame types. The shim sends Stdout, Stderr and Exit; the daemon sends
// Stdin, StdinClose, Signal, Release and Drained.
const (
	FrameStdout     byte = 'o' // payload: stdout bytes
	FrameStderr     byte = 'e' // payload: stderr bytes
	FrameExit       byte = 'x' // payload: ExitStatus JSON; the last frame of a stream
	FrameStdin      byte = 'i' // payload: bytes for the CLI's stdin
	FrameStdinClose byte = 'c' // empty: close the CLI's stdin (once)
	FrameSignal     byte = 's' // 4 bytes, big endian: a signal for the CLI's process group
	FrameRelease    byte = 'r' // empty: the run's end is stored; remove the directory and exit
	// FrameDrained: 1 byte, 0 (stdout) or 1 (stderr): the holder of a
	// spool run's spooling read that pipe's end (spool.go).
	FrameDrained byte = 'd'
)

// ErrProtocol marks a malformed hello, info or frame.
var ErrProtocol = errors.New("remote-shim protocol error")

// Spec is what the daemon asks the shim to run.
type Spec struct {
	Path string   `json:"path"`
	Args []string `json:"args,omitempty"`
	Env  []string `json:"env,omitempty"`
	Dir  string   `json:"dir,omitempty"`
	UID  *uint32  `json:"uid,omitempty"`
	GID  *uint32  `json:"gid,omitempty"`
	// Spool makes the spool files the CLI's stdout and stderr: the shim
	// copies nothing (version 2; spool.go).
	Spool bool `json:"spool,omitempty"`
}

// Hello is the daemon's first line: start the CLI (Spec set), or attach
// to a started one from the given spool offsets.
type Hello struct {
	Version int   `json:"version"`
	Spec    *Spec `json:"spec,omitempty"`
	Stdout  int64 `json:"stdout,omitempty"`
	Stderr  int64 `json:"stderr,omitempty"`
}

// Info is the shim's answer to a hello.
type Info struct {
	Version     int   `json:"version"`
	PID         int   `json:"pid,omitempty"` // the CLI's pid (its process group)
	StdinBytes  int64 `json:"stdinBytes"`    // stdin bytes received from daemons so far
	StdinClosed bool  `json:"stdinClosed,omitempty"`
	Exited      bool  `json:"exited,omitempty"`
	// Spool: the run's output is in its spool files only; a version 2
	// client reads them itself, and the connection carries no output
	// frames, only the exit frame with the spools' final sizes.
	Spool bool   `json:"spool,omitempty"`
	Error string `json:"error,omitempty"` // the hello was refused
}

// ExitStatus is the CLI's end: its exit code, or 128+N when signal N
// killed it.
type ExitStatus struct {
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty"`
	// The spools' final sizes: a spool run's output ends there (sent to a
	// version 2 client of a spool run only).
	Stdout int64 `json:"stdout,omitempty"`
	Stderr int64 `json:"stderr,omitempty"`
}

// Frame is one protocol frame.
type Frame struct {
	Type    byte
	Payload []byte
}

// Signal returns the signal of a FrameSignal.
func (f Frame) Signal() int { return int(binary.BigEndian.Uint32(f.Payload)) }

// SignalFrame returns the frame that sends sig to the CLI's group.
func SignalFrame(sig int) Frame {
	p := make([]byte, 4)
	binary.BigEndian.PutUint32(p, uint32(sig))
	return Frame{Type: FrameSignal, Payload: p}
}

// AppendFrame appends f's encoding to b.
func AppendFrame(b []byte, f Frame) []byte {
	b = append(b, f.Type)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Payload)))
	return append(b, f.Payload...)
}

// WriteFrame writes f to w in one Write.
func WriteFrame(w io.Writer, f Frame) error {
	if len(f.Payload) > MaxFrame {
		return fmt.Errorf("%w: frame %q of %d bytes is over %d", ErrProtocol, f.Type, len(f.Payload), MaxFrame)
	}
	_, err := w.Write(AppendFrame(make([]byte, 0, 5+len(f.Payload)), f))
	return err
}

// ReadFrame reads and checks one frame. io.EOF means the stream ended
// cleanly between frames; a stream cut inside a frame is
// io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader) (Frame, error) {
	typ, n, err := readHeader(r)
	if err != nil {
		return Frame{}, err
	}
	return readPayload(r, typ, make([]byte, n))
}

// readHeader reads and checks a frame's header: its type and length.
func readHeader(r io.Reader) (byte, int, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if err := checkHeader(hdr[0], n); err != nil {
		return 0, 0, err
	}
	return hdr[0], int(n), nil
}

// readPayload reads the payload of a frame of type typ into p, which has
// the length its header gave, and checks it.
func readPayload(r io.Reader, typ byte, p []byte) (Frame, error) {
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	f := Frame{Type: typ, Payload: p}
	if err := checkPayload(f); err != nil {
		return Frame{}, err
	}
	return f, nil
}

// DecodeFrame decodes the one frame b holds exactly.
func DecodeFrame(b []byte) (Frame, error) {
	r := bytes.NewReader(b)
	f, err := ReadFrame(r)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("%w: truncated frame", ErrProtocol)
		}
		return Frame{}, err
	}
	if r.Len() != 0 {
		return Frame{}, fmt.Errorf("%w: %d bytes after the frame", ErrProtocol, r.Len())
	}
	return f, nil
}

func checkHeader(typ byte, n uint32) error {
	switch typ {
	case FrameStdout, FrameStderr, FrameStdin, FrameExit:
	case FrameStdinClose, FrameRelease:
		if n != 0 {
			return fmt.Errorf("%w: frame %q must be empty, has %d bytes", ErrProtocol, typ, n)
		}
	case FrameSignal:
		if n != 4 {
			return fmt.Errorf("%w: signal frame of %d bytes, want 4", ErrProtocol, n)
		}
	case FrameDrained:
		if n != 1 {
			return fmt.Errorf("%w: drained frame of %d bytes, want 1", ErrProtocol, n)
		}
	default:
		return fmt.Errorf("%w: unknown frame type 0x%02x", ErrProtocol, typ)
	}
	if n > MaxFrame {
		return fmt.Errorf("%w: frame %q of %d bytes is over %d", ErrProtocol, typ, n, MaxFrame)
	}
	return nil
}

func checkPayload(f Frame) error {
	switch f.Type {
	case FrameSignal:
		if s := f.Signal(); s < 1 || s > 64 {
			return fmt.Errorf("%w: signal %d out of range 1-64", ErrProtocol, s)
		}
	case FrameExit:
		if _, err := DecodeExit(f.Payload); err != nil {
			return err
		}
	case FrameDrained:
		if f.Payload[0] > 1 {
			return fmt.Errorf("%w: drained frame for stream %d, want 0 or 1", ErrProtocol, f.Payload[0])
		}
	}
	return nil
}

// DecodeExit decodes an exit frame's payload or the exit file.
func DecodeExit(b []byte) (ExitStatus, error) {
	var st ExitStatus
	if err := decodeStrict(b, &st); err != nil {
		return ExitStatus{}, fmt.Errorf("%w: exit status: %w", ErrProtocol, err)
	}
	if st.Code < 0 || st.Code > 255 || st.Signal < 0 || st.Signal > 64 {
		return ExitStatus{}, fmt.Errorf("%w: exit status code %d signal %d out of range", ErrProtocol, st.Code, st.Signal)
	}
	if st.Stdout < 0 || st.Stderr < 0 {
		return ExitStatus{}, fmt.Errorf("%w: exit status: negative spool size (stdout %d, stderr %d)", ErrProtocol, st.Stdout, st.Stderr)
	}
	return st, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// DecodeHello decodes and checks a hello line (without its newline).
func DecodeHello(b []byte) (Hello, error) {
	var h Hello
	if err := decodeStrict(b, &h); err != nil {
		return Hello{}, fmt.Errorf("%w: hello: %w", ErrProtocol, err)
	}
	if h.Version < MinProtocolVersion || h.Version > ProtocolVersion {
		return Hello{}, fmt.Errorf("%w: hello: protocol version %d, this shim speaks %d to %d", ErrProtocol, h.Version, MinProtocolVersion, ProtocolVersion)
	}
	if h.Stdout < 0 || h.Stderr < 0 {
		return Hello{}, fmt.Errorf("%w: hello: negative offset (stdout %d, stderr %d)", ErrProtocol, h.Stdout, h.Stderr)
	}
	if s := h.Spec; s != nil {
		if h.Stdout != 0 || h.Stderr != 0 {
			return Hello{}, fmt.Errorf("%w: hello: a start reads from offset 0", ErrProtocol)
		}
		if s.Spool && h.Version < 2 {
			return Hello{}, fmt.Errorf("%w: start: a spool run needs protocol version 2", ErrProtocol)
		}
		if s.Path == "" || strings.ContainsRune(s.Path, 0) {
			return Hello{}, fmt.Errorf("%w: start: empty or invalid command path", ErrProtocol)
		}
		for _, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				return Hello{}, fmt.Errorf("%w: start: an argument holds a NUL byte", ErrProtocol)
			}
		}
		for _, kv := range s.Env {
			// Only the key may be named: values may be secrets.
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsRune(kv, 0) {
				return Hello{}, fmt.Errorf("%w: start: environment entry %q is not KEY=VALUE", ErrProtocol, k)
			}
		}
		if strings.ContainsRune(s.Dir, 0) {
			return Hello{}, fmt.Errorf("%w: start: invalid working directory", ErrProtocol)
		}
	}
	return h, nil
}

// readLine reads one newline-terminated line of at most MaxHello bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > MaxHello {
			return nil, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, MaxHello)
		}
		if err == nil {
			return line[:len(line)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && len(line) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// AttachExitNoShim is the exit code of `remote-shim attach` when no shim
// serves the run directory (it is gone, or nothing answers on its socket).
const AttachExitNoShim = 3
