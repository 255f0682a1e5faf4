package store

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"remote/api"
)

// benchEvent is a typical streamed token event.
func benchEvent(i int) api.Event {
	return api.Event{Type: api.EventAssistantText, TurnID: "turn-0001", MessageID: "msg_01XYZabc", Text: fmt.Sprintf("token %d ", i)}
}

func reportEventsPerSec(b *testing.B, events int) {
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendDurable measures durable (fsynced, group-committed) append
// throughput: one op is one event.
func BenchmarkAppendDurable(b *testing.B) {
	b.Run("async/1chat", func(b *testing.B) {
		s, _ := newTestStore(b)
		mkChat(b, s, "aaaa")
		var wg sync.WaitGroup
		wg.Add(b.N)
		done := func(_ api.Event, err error) {
			if err != nil {
				b.Error(err)
			}
			wg.Done()
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			s.AppendAsync("aaaa", benchEvent(i), done)
		}
		wg.Wait()
		reportEventsPerSec(b, b.N)
	})
	for _, mode := range []string{"async", "sync"} {
		b.Run(mode+"/16chats", func(b *testing.B) {
			s, _ := newTestStore(b)
			const chats = 16
			for c := range chats {
				mkChat(b, s, fmt.Sprintf("c%03d", c))
			}
			var wg sync.WaitGroup
			b.ResetTimer()
			for c := range chats {
				id := fmt.Sprintf("c%03d", c)
				n := b.N / chats
				if c < b.N%chats {
					n++
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var inner sync.WaitGroup
					for i := range n {
						if mode == "sync" {
							if _, err := s.Append(id, benchEvent(i)); err != nil {
								b.Error(err)
							}
							continue
						}
						inner.Add(1)
						s.AppendAsync(id, benchEvent(i), func(_ api.Event, err error) {
							if err != nil {
								b.Error(err)
							}
							inner.Done()
						})
					}
					inner.Wait()
				}()
			}
			wg.Wait()
			reportEventsPerSec(b, b.N)
		})
	}
}

// BenchmarkReplay100k measures reading back a 100,000-event chat from seq 0;
// one op is the whole replay.
func BenchmarkReplay100k(b *testing.B) {
	s, _ := newTestStore(b)
	mkChat(b, s, "aaaa")
	const n = 100_000
	evs := make([]api.Event, 0, 1000)
	for i := 0; i < n; i += 1000 {
		evs = evs[:0]
		for j := range 1000 {
			evs = append(evs, benchEvent(i+j))
		}
		if _, err := s.Append("aaaa", evs...); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	b.Run("decoded", func(b *testing.B) {
		for b.Loop() {
			count := 0
			if err := s.Events("aaaa", 0, 0, func(api.Event) error { count++; return nil }); err != nil {
				b.Fatal(err)
			}
			if count != n {
				b.Fatalf("replayed %d events, want %d", count, n)
			}
		}
	})
	b.Run("raw", func(b *testing.B) {
		for b.Loop() {
			count := 0
			if err := s.EventsRaw("aaaa", 0, 0, func(int64, []byte) error { count++; return nil }); err != nil {
				b.Fatal(err)
			}
			if count != n {
				b.Fatalf("replayed %d events, want %d", count, n)
			}
		}
	})
}

// jsonlLog is the original Remote's event log, reimplemented as the
// baseline: one events.jsonl per chat, each append scans the whole file for
// the last seq and appends one JSON line. The original did not fsync; sync
// adds the fsync its durability would need.
type jsonlLog struct {
	path string
	sync bool
}

func (l *jsonlLog) lastSeq() (int64, error) {
	f, err := os.Open(l.path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var last int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return 0, err
		}
		last = ev.Seq
	}
	return last, sc.Err()
}

func (l *jsonlLog) append(ev api.Event) error {
	last, err := l.lastSeq()
	if err != nil {
		return err
	}
	ev.Seq = last + 1
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	if l.sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func (l *jsonlLog) replay(since int64, fn func(api.Event)) error {
	raw, err := os.ReadFile(l.path)
	if err != nil {
		return err
	}
	for line := range bytes.Lines(raw) {
		var ev api.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		if ev.Seq > since {
			fn(ev)
		}
	}
	return nil
}

// prefill writes n events straight to the file (not timed).
func (l *jsonlLog) prefill(b *testing.B, n int) {
	var buf bytes.Buffer
	for i := range n {
		ev := benchEvent(i)
		ev.Seq = int64(i + 1)
		line, _ := json.Marshal(ev)
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(l.path, buf.Bytes(), 0o600); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkOriginJSONLAppend measures the original design's append on a chat
// that already holds 1,000 or 10,000 events, with and without fsync; one op
// is one event, from one writer (the original serialised appends per chat).
func BenchmarkOriginJSONLAppend(b *testing.B) {
	for _, sync := range []bool{false, true} {
		for _, prefill := range []int{1_000, 10_000} {
			b.Run(fmt.Sprintf("fsync=%v/prefill=%d", sync, prefill), func(b *testing.B) {
				l := &jsonlLog{path: filepath.Join(b.TempDir(), "events.jsonl"), sync: sync}
				l.prefill(b, prefill)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := l.append(benchEvent(i)); err != nil {
						b.Fatal(err)
					}
				}
				reportEventsPerSec(b, b.N)
			})
		}
	}
}

// BenchmarkOriginJSONLReplay100k measures the original design's replay of a
// 100,000-event chat (read and parse the whole file); one op is the replay.
func BenchmarkOriginJSONLReplay100k(b *testing.B) {
	l := &jsonlLog{path: filepath.Join(b.TempDir(), "events.jsonl")}
	l.prefill(b, 100_000)
	b.ResetTimer()
	for b.Loop() {
		count := 0
		if err := l.replay(0, func(api.Event) { count++ }); err != nil {
			b.Fatal(err)
		}
		if count != 100_000 {
			b.Fatalf("replayed %d", count)
		}
	}
}
