// Package keyed holds two small per-key concurrency tools: Lock, a mutex
// per key that a context can give up waiting for, and Flight, one call per
// key at a time with late callers sharing its result. provisioning uses
// them for container lifecycles and CLI installs.
//
// It imports the standard library only.
package keyed

import (
	"context"
	"sync"
)

// Lock serializes work per key. Its zero value is ready; provisioning
// holds one per container lifecycle, so that concurrent preparations, the
// reconciler and the API never race on LXD (LXD refuses a start while its
// create operation still holds the instance).
type Lock struct {
	mu sync.Mutex
	m  map[string]*lockEntry
}

type lockEntry struct {
	ch      chan struct{} // holds one token while locked
	waiters int
}

// Lock waits for key's lock or for ctx to end, and returns the unlock.
func (k *Lock) Lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*lockEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &lockEntry{ch: make(chan struct{}, 1)}
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

// Flight runs one function per key at a time; callers arriving while it
// runs wait for and share its result (a minimal singleflight). Make it
// with NewFlight.
type Flight struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	done chan struct{}
	err  error
}

// NewFlight returns an empty Flight.
func NewFlight() *Flight { return &Flight{calls: map[string]*flightCall{}} }

// Do runs fn unless a call for key is in flight, then waits for it and
// returns its error.
func (f *Flight) Do(key string, fn func() error) error {
	f.mu.Lock()
	if c, ok := f.calls[key]; ok {
		f.mu.Unlock()
		<-c.done
		return c.err
	}
	c := &flightCall{done: make(chan struct{})}
	f.calls[key] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		f.mu.Unlock()
		close(c.done)
	}()
	c.err = fn()
	return c.err
}
