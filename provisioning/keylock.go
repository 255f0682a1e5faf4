package provisioning

import (
	"context"
	"sync"
)

// keyLock serializes work per key — one container's lifecycle — so that
// concurrent preparations, the reconciler and the API never race on LXD
// (LXD refuses a start while its create operation still holds the
// instance: "Instance is busy running a create operation").
type keyLock struct {
	mu sync.Mutex
	m  map[string]*keyLockEntry
}

type keyLockEntry struct {
	ch      chan struct{} // holds one token while locked
	waiters int
}

// lock waits for key's lock or for ctx to end, and returns the unlock.
func (k *keyLock) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyLockEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyLockEntry{ch: make(chan struct{}, 1)}
		k.m[key] = e
	}
	e.waiters++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if e.waiters--; e.waiters == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
