package provisioning

import "sync"

// flight runs one function per key at a time; callers arriving while it
// runs wait for and share its result (a minimal singleflight).
type flight struct {
	mu    sync.Mutex
	calls map[string]*flightCall
}

type flightCall struct {
	done chan struct{}
	err  error
}

func newFlight() flight { return flight{calls: map[string]*flightCall{}} }

// do runs fn unless a call for key is in flight, then waits for it.
func (f *flight) do(key string, fn func() error) error {
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
