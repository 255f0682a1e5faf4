// Package keyfile owns the daemon's secrets key file: 32 random bytes
// (AES-256) made once with mode 0600, and refused when group or others may
// read it or its size is wrong. The store seals project secrets with the
// key; this package only creates, checks and reads the file.
//
// It imports internal/errdefs and the standard library only; never the
// store, the daemon or anything of LXD.
package keyfile

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"

	"remote/internal/errdefs"
)

// Size is the key's size in bytes (AES-256).
const Size = 32

// ErrInvalid means a key file exists but may not be used (errdefs class
// InvalidArgument): its mode, its size or its type is wrong.
var ErrInvalid = errdefs.New(errdefs.ErrInvalidArgument, "unusable")

// LoadOrCreate returns the 32-byte secrets key kept in the file at path,
// creating the file (mode 0600, 32 random bytes) when it does not exist. It
// refuses a key file that group or others may access, or that does not hold
// exactly 32 bytes. A systemd credential file (mode 0400) is accepted.
func LoadOrCreate(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		key := make([]byte, Size)
		if _, err := io.ReadFull(rand.Reader, key); err != nil {
			f.Close()
			os.Remove(path)
			return nil, fmt.Errorf("create key file %s: %w", path, err)
		}
		_, err = f.Write(key)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("create key file %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create key file %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s: %w: not a regular file", path, ErrInvalid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s: %w: mode %04o lets group or others read it; chmod 600 it", path, ErrInvalid, perm)
	}
	if fi.Size() != Size {
		return nil, fmt.Errorf("key file %s: %w: %d bytes, want %d", path, ErrInvalid, fi.Size(), Size)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file %s: %w", path, err)
	}
	if len(key) != Size {
		return nil, fmt.Errorf("key file %s: %w: %d bytes, want %d", path, ErrInvalid, len(key), Size)
	}
	return key, nil
}
