package runhub

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"remote/api"
	"remote/daemon/metrics"
	"remote/daemon/store"
)

func benchHub(b *testing.B, queue int) (*Hub, *metrics.Metrics, func()) {
	b.Helper()
	st := openStore(b, b.TempDir())
	m := metrics.New()
	return NewHub(st, nil, m, queue), m, func() { st.Close() }
}

// follow starts n subscribers of chat that check every event arrives once
// and in order, and signal when they have seen want of them. Like a real
// client, a subscriber dropped for being slow resumes from its last seq;
// resumes counts those reconnections.
func follow(b *testing.B, h *Hub, chat string, n int, want int64) (wait func(), cancel func(), resumes *atomic.Int64) {
	createChat(b, h, chat)
	ctx, stop := context.WithCancel(context.Background())
	var ready, done sync.WaitGroup
	ready.Add(n)
	done.Add(n)
	var lost atomic.Int64
	resumes = &atomic.Int64{}
	for range n {
		go func() {
			defer done.Done()
			var last int64
			synced := false
			var err error
			for {
				err = h.Follow(ctx, chat, last, func(ev api.Event) error {
					if ev.Type == api.EventSync && !synced {
						synced = true
						ready.Done()
						return nil
					}
					if ev.Seq > 0 {
						if ev.Seq != last+1 {
							return fmt.Errorf("got seq %d after %d", ev.Seq, last)
						}
						last = ev.Seq
						if last == want {
							return errDone
						}
					}
					return nil
				})
				if !errors.Is(err, ErrSlowSubscriber) {
					break
				}
				resumes.Add(1)
			}
			if !errors.Is(err, errDone) {
				if !synced {
					ready.Done()
				}
				b.Error(err)
				lost.Add(want - last)
			}
		}()
	}
	ready.Wait()
	return func() {
			done.Wait()
			if l := lost.Load(); l != 0 {
				b.Fatalf("%d events lost across %d subscribers", l, n)
			}
		}, func() {
			stop()
		}, resumes
}

func createChat(b *testing.B, h *Hub, id string) {
	if err := h.store.(*store.Store).CreateChat(api.Chat{ID: id, Owner: "bench", Provider: "claude"}); err != nil {
		b.Fatal(err)
	}
}

var benchEvent = api.Event{Type: api.EventAssistantText, Text: "a token or two of streamed text", MessageID: "msg_01"}

// BenchmarkHubAppendBroadcast: one run streaming into one chat with one
// follower; every event is durable (fsync, group-committed) before it is
// broadcast. The producer here is far faster than any CLI, so on a busy
// 2-core machine the follower can fall a whole queue behind and be
// dropped by design; this benchmark measures throughput, so its follower
// gets a deep queue (the drop path is TestHubSlowSubscriber's).
func BenchmarkHubAppendBroadcast(b *testing.B) {
	h, _, closeStore := benchHub(b, 1<<20)
	defer closeStore()
	wait, cancel, _ := follow(b, h, "bbbb0001", 1, int64(b.N))
	defer cancel()
	b.ResetTimer()
	for range b.N {
		h.AppendAsync("bbbb0001", benchEvent, nil)
	}
	wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkHubAppendBroadcast16Chats: sixteen chats streaming at once.
func BenchmarkHubAppendBroadcast16Chats(b *testing.B) {
	h, _, closeStore := benchHub(b, 0)
	defer closeStore()
	const chats = 16
	per := b.N/chats + 1
	var waits []func()
	for i := range chats {
		wait, cancel, _ := follow(b, h, fmt.Sprintf("c%04d", i), 1, int64(per))
		defer cancel()
		waits = append(waits, wait)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range chats {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				h.AppendAsync(fmt.Sprintf("c%04d", i), benchEvent, nil)
			}
		}()
	}
	wg.Wait()
	for _, w := range waits {
		w()
	}
	b.ReportMetric(float64(per*chats)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkHubFanout100: one chat, 100 followers; every follower gets
// every event exactly once and in order. The producer runs flat out, so a
// follower starved of CPU is dropped and resumes from its last seq (as the
// chat socket's clients do); "resumes" reports how often that happened.
func BenchmarkHubFanout100(b *testing.B) {
	h, m, closeStore := benchHub(b, 0)
	defer closeStore()
	wait, cancel, resumes := follow(b, h, "fa00", 100, int64(b.N))
	defer cancel()
	b.ResetTimer()
	for range b.N {
		h.AppendAsync("fa00", benchEvent, nil)
	}
	wait()
	b.StopTimer()
	if d := testutilCounter(m); d != float64(resumes.Load()) {
		b.Fatalf("%v subscribers dropped but %d resumed", d, resumes.Load())
	}
	b.ReportMetric(float64(resumes.Load()), "resumes")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "deliveries/s")
}

func testutilCounter(m *metrics.Metrics) float64 {
	mfs, _ := m.Registry().Gather()
	for _, mf := range mfs {
		if mf.GetName() == "remoted_subscribers_dropped_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return -1
}

// BenchmarkFollowReplay100k: a subscriber joining a chat of 100,000 events
// receives all of them (paged cursor reads) and its sync.
func BenchmarkFollowReplay100k(b *testing.B) {
	h, _, closeStore := benchHub(b, 0)
	defer closeStore()
	const total = 100_000
	createChat(b, h, "b1b1")
	batch := make([]api.Event, 1000)
	for i := range batch {
		batch[i] = benchEvent
	}
	for range total / len(batch) {
		if _, err := h.store.(interface {
			Append(string, ...api.Event) ([]api.Event, error)
		}).Append("b1b1", batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		n := 0
		err := h.Follow(context.Background(), "b1b1", 0, func(ev api.Event) error {
			if ev.Type == api.EventSync {
				return errDone
			}
			n++
			return nil
		})
		if !errors.Is(err, errDone) || n != total {
			b.Fatalf("replayed %d events (%v)", n, err)
		}
	}
}

// BenchmarkOriginalDesignAppend models the original backend's event log for
// comparison: one JSON line appended per event, after scanning the whole
// file for the last seq, with an fsync so it is as durable as ours. The
// file starts with 10,000 events (a long chat).
func BenchmarkOriginalDesignAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "events.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for i := range 10_000 {
		ev := benchEvent
		ev.Seq = int64(i + 1)
		enc.Encode(ev)
	}
	f.Close()
	b.ResetTimer()
	for range b.N {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		var last int64
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			var ev api.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Seq > last {
				last = ev.Seq
			}
		}
		ev := benchEvent
		ev.Seq = last + 1
		line, _ := json.Marshal(ev)
		f.Write(append(line, '\n'))
		f.Sync()
		f.Close()
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
