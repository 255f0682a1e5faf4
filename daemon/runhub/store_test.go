package runhub

import (
	"bytes"
	"path/filepath"
	"testing"

	"remote/daemon/store"
)

// openStore opens a real store in dir with a fixed secrets key.
func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(dir, "remoted.db"), store.Options{Key: bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	return st
}
