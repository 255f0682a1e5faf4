package lazyre

import (
	"sync"
	"testing"
)

// A lazy pattern matches like the compiled one, from many goroutines at
// its first use, and a bad pattern panics at that use.
func TestLazyMatchesAndPanicsOnFirstUse(t *testing.T) {
	re := New(`^[a-z]{1,3}$`)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !re.MatchString("abc") || re.MatchString("abcd") {
				t.Error("^[a-z]{1,3}$ matched wrong")
			}
		}()
	}
	wg.Wait()
	if got := New(`^(\d+)-(\d+)$`).FindStringSubmatch("12-34"); len(got) != 3 || got[2] != "34" {
		t.Errorf("FindStringSubmatch: %q", got)
	}
	bad := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("a pattern that does not compile did not panic at its first use")
		}
	}()
	bad.MatchString("x")
}
