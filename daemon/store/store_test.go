package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// boltTx names the transaction type for tests that edit raw buckets.
type boltTx = bolt.Tx

// The test binary re-executes itself as a child process for the crash and
// lock tests; the child's role is chosen by this variable.
const childEnv = "REMOTE_STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "crash":
		childCrash(os.Args[len(os.Args)-1])
	case "lock":
		childLock(os.Args[len(os.Args)-1])
	default:
		fmt.Fprintln(os.Stderr, "unknown child role")
		os.Exit(2)
	}
}

var testKey = bytes.Repeat([]byte{7}, KeySize)

func openTest(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{Key: testKey})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func newTestStore(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "remote.db")
	s := openTest(t, path)
	t.Cleanup(func() { s.Close() })
	return s, path
}

func mkChat(t testing.TB, s *Store, id string) api.Chat {
	t.Helper()
	c := api.Chat{ID: id, Title: "t " + id, Provider: "claude", CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if err := s.CreateChat(c); err != nil {
		t.Fatalf("CreateChat(%s): %v", id, err)
	}
	return c
}

func allEvents(t testing.TB, s *Store, chat string, after int64) []api.Event {
	t.Helper()
	var out []api.Event
	if err := s.Events(chat, after, 0, func(ev api.Event) error { out = append(out, ev); return nil }); err != nil {
		t.Fatalf("Events(%s, %d): %v", chat, after, err)
	}
	return out
}

// checkGapless fails unless evs have seqs 1..len(evs).
func checkGapless(t testing.TB, evs []api.Event) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
}

// snapshot captures everything observable in the store, to check that a
// rejected call changed nothing.
func snapshot(t *testing.T, s *Store) string {
	t.Helper()
	var b strings.Builder
	chats, err := s.Chats()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chats {
		fmt.Fprintf(&b, "chat %+v\n", c)
		for _, ev := range allEvents(t, s, c.ID, 0) {
			raw, _ := json.Marshal(ev)
			fmt.Fprintf(&b, "  %s\n", raw)
		}
	}
	projects, err := s.Projects()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range projects {
		fmt.Fprintf(&b, "project %+v\n", p)
		secs, err := s.Secrets(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range secs {
			fmt.Fprintf(&b, "  %s=%x\n", sec.Key, sec.Value)
		}
	}
	return b.String()
}

func TestBadInputChangesNothing(t *testing.T) {
	s, _ := newTestStore(t)
	mkChat(t, s, "abcd1234abcd")
	if _, err := s.Append("abcd1234abcd", api.Event{Type: api.EventUser, Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(api.Project{Name: "web", Container: "remote-web"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret("web", "TOKEN", "s3cr3t"); err != nil {
		t.Fatal(err)
	}
	errFn := errors.New("fn refused")
	tests := []struct {
		name    string
		call    func() error
		want    error
		mention string // the bad input the message must name
	}{
		{"chat id too short", func() error { return s.CreateChat(api.Chat{ID: "abc"}) }, ErrInvalid, `"abc"`},
		{"chat id upper case", func() error { return s.CreateChat(api.Chat{ID: "ABCD1234"}) }, ErrInvalid, `"ABCD1234"`},
		{"chat id too long", func() error { return s.CreateChat(api.Chat{ID: strings.Repeat("a", 33)}) }, ErrInvalid, "chat id"},
		{"chat id path", func() error { _, err := s.Chat("../etc"); return err }, ErrInvalid, `"../etc"`},
		{"chat bad project", func() error { return s.CreateChat(api.Chat{ID: "beef", Project: "-x"}) }, ErrInvalid, `"-x"`},
		{"chat exists", func() error { return s.CreateChat(api.Chat{ID: "abcd1234abcd"}) }, ErrExists, "abcd1234abcd"},
		{"chat missing", func() error { _, err := s.Chat("ffff"); return err }, ErrNotFound, "ffff"},
		{"delete missing chat", func() error { return s.DeleteChat("ffff") }, ErrNotFound, "ffff"},
		{"update fn error", func() error {
			_, err := s.UpdateChat("abcd1234abcd", func(c *api.Chat) error { c.Title = "changed"; return errFn })
			return err
		}, errFn, "fn refused"},
		{"update changes id", func() error {
			_, err := s.UpdateChat("abcd1234abcd", func(c *api.Chat) error { c.ID = "beef"; return nil })
			return err
		}, ErrInvalid, "beef"},
		{"append empty type", func() error { _, err := s.Append("abcd1234abcd", api.Event{Text: "x"}); return err }, ErrInvalid, "empty type"},
		{"append sync", func() error { _, err := s.Append("abcd1234abcd", api.Event{Type: api.EventSync}); return err }, ErrInvalid, "sync"},
		{"append bad raw json", func() error {
			_, err := s.Append("abcd1234abcd", api.Event{Type: "user"}, api.Event{Type: "tool_use_start", Input: json.RawMessage("{")})
			return err
		}, ErrInvalid, "event 1"},
		{"append unknown chat", func() error { _, err := s.Append("ffff", api.Event{Type: "user"}); return err }, ErrNotFound, "ffff"},
		{"append bad chat id", func() error { _, err := s.Append("x", api.Event{Type: "user"}); return err }, ErrInvalid, `"x"`},
		{"events unknown chat", func() error { return s.Events("ffff", 0, 0, func(api.Event) error { return nil }) }, ErrNotFound, "ffff"},
		{"copy onto non-empty", func() error { return s.CopyEvents("abcd1234abcd", "abcd1234abcd") }, ErrInvalid, "itself"},
		{"project bad name", func() error { return s.CreateProject(api.Project{Name: "bad_name"}) }, ErrInvalid, `"bad_name"`},
		{"project trailing hyphen", func() error { return s.CreateProject(api.Project{Name: "web-"}) }, ErrInvalid, `"web-"`},
		{"project leading digit", func() error { return s.CreateProject(api.Project{Name: "1web"}) }, ErrInvalid, `"1web"`},
		{"project exists", func() error { return s.CreateProject(api.Project{Name: "web"}) }, ErrExists, "web"},
		{"project missing", func() error { _, err := s.Project("nope"); return err }, ErrNotFound, "nope"},
		{"secret bad key", func() error { return s.PutSecret("web", "1BAD", "v") }, ErrInvalid, `"1BAD"`},
		{"secret key with equals", func() error { return s.PutSecret("web", "A=B", "v") }, ErrInvalid, `"A=B"`},
		{"secret unknown project", func() error { return s.PutSecret("nope", "TOKEN", "v") }, ErrNotFound, "nope"},
		{"secret too large", func() error { return s.PutSecret("web", "BIG", strings.Repeat("x", maxSecretValue+1)) }, ErrInvalid, "BIG"},
		{"delete missing secret", func() error { return s.DeleteSecret("web", "NOPE") }, ErrNotFound, "NOPE"},
		{"update project renames", func() error {
			_, err := s.UpdateProject("web", func(p *api.Project) error { p.Name = "other"; return nil })
			return err
		}, ErrInvalid, "other"},
	}
	before := snapshot(t, s)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not name %q", err, tt.mention)
			}
			if strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("error leaks a secret value: %q", err)
			}
			if after := snapshot(t, s); after != before {
				t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestChatsCRUD(t *testing.T) {
	s, _ := newTestStore(t)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, id := range []string{"cccc", "aaaa", "bbbb"} {
		if err := s.CreateChat(api.Chat{ID: id, Provider: "codex", CreatedAt: base.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	chats, err := s.Chats()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range chats {
		ids = append(ids, c.ID)
	}
	if want := []string{"cccc", "aaaa", "bbbb"}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("Chats order = %v, want oldest first %v", ids, want)
	}
	got, err := s.UpdateChat("aaaa", func(c *api.Chat) error {
		c.Sessions = map[string]string{"codex": "s1"}
		c.Running = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Chat("aaaa")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, again) || again.Sessions["codex"] != "s1" || !again.Running {
		t.Fatalf("UpdateChat returned %+v, stored %+v", got, again)
	}
	if _, err := s.Append("aaaa", api.Event{Type: "user", Text: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat("aaaa"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Chat("aaaa"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Chat after delete: %v, want ErrNotFound", err)
	}
	// A recreated chat with the same id starts an empty log.
	mkChat(t, s, "aaaa")
	if n, err := s.LastSeq("aaaa"); err != nil || n != 0 {
		t.Fatalf("LastSeq of recreated chat = %d, %v; want 0", n, err)
	}
}

func TestProjectsAndSecrets(t *testing.T) {
	s, _ := newTestStore(t)
	for _, name := range []string{"web", "api-server", "A1"} {
		if err := s.CreateProject(api.Project{Name: name, Container: "remote-" + name, Status: "stopped"}); err != nil {
			t.Fatalf("CreateProject(%s): %v", name, err)
		}
	}
	ps, err := s.Projects()
	if err != nil || len(ps) != 3 || ps[0].Name != "A1" || ps[2].Name != "web" {
		t.Fatalf("Projects() = %+v, %v", ps, err)
	}
	p, err := s.UpdateProject("web", func(p *api.Project) error { p.Status = "running"; return nil })
	if err != nil || p.Status != "running" {
		t.Fatalf("UpdateProject = %+v, %v", p, err)
	}
	for k, v := range map[string]string{"B_KEY": "two", "A_KEY": "one", "_X": ""} {
		if err := s.PutSecret("web", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutSecret("web", "B_KEY", "two-b"); err != nil { // replace
		t.Fatal(err)
	}
	keys, err := s.SecretKeys("web")
	if err != nil || len(keys) != 3 || keys[0].Key != "A_KEY" || keys[1].Key != "B_KEY" || keys[0].UpdatedAt.IsZero() {
		t.Fatalf("SecretKeys = %+v, %v", keys, err)
	}
	secs, err := s.Secrets("web")
	want := []Secret{{"A_KEY", "one"}, {"B_KEY", "two-b"}, {"_X", ""}}
	if err != nil || !reflect.DeepEqual(secs, want) {
		t.Fatalf("Secrets = %v, %v", secs, err)
	}
	if got := fmt.Sprintf("%v %+v %#v %s", secs[0], secs[0], secs[0], secs[0]); strings.Contains(got, "one") {
		t.Fatalf("formatting a Secret shows its value: %s", got)
	}
	if err := s.DeleteSecret("web", "A_KEY"); err != nil {
		t.Fatal(err)
	}
	if keys, _ := s.SecretKeys("web"); len(keys) != 2 {
		t.Fatalf("after DeleteSecret: %+v", keys)
	}
	if err := s.DeleteProject("web"); err != nil {
		t.Fatal(err)
	}
	// A recreated project does not inherit the old secrets.
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if keys, err := s.SecretKeys("web"); err != nil || len(keys) != 0 {
		t.Fatalf("secrets survived DeleteProject: %+v, %v", keys, err)
	}
}

func TestSecretsEncryptedOnDisk(t *testing.T) {
	s, path := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	plain := "plaintext-canary-8d1f0c"
	if err := s.PutSecret("web", "TOKEN", plain); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(plain)) {
		t.Fatal("secret value found in plaintext in the store file")
	}
	if !bytes.Contains(raw, []byte("TOKEN")) {
		t.Fatal("sanity: key name not found in the store file")
	}

	t.Run("wrong key", func(t *testing.T) {
		_, err := Open(path, Options{Key: bytes.Repeat([]byte{8}, KeySize)})
		if !errors.Is(err, ErrWrongKey) {
			t.Fatalf("Open with another key: %v, want ErrWrongKey", err)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name the file", err)
		}
	})
	t.Run("short key", func(t *testing.T) {
		if _, err := Open(path, Options{Key: []byte("short")}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Open with a 5-byte key: %v, want ErrInvalid", err)
		}
	})
	t.Run("swapped values fail to decrypt", func(t *testing.T) {
		s := openTest(t, path)
		defer s.Close()
		if err := s.PutSecret("web", "OTHER", "x"); err != nil {
			t.Fatal(err)
		}
		// Move TOKEN's ciphertext under OTHER, as an attacker with the file could.
		err := s.update(func(tx *boltTx) error {
			b := tx.Bucket(bucketSecrets).Bucket([]byte("web"))
			return b.Put([]byte("OTHER"), append([]byte(nil), b.Get([]byte("TOKEN"))...))
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Secrets("web")
		if !errors.Is(err, ErrWrongKey) || strings.Contains(err.Error(), plain) {
			t.Fatalf("Secrets after swap: %v, want ErrWrongKey without the value", err)
		}
	})
}

func TestAppendAndReplay(t *testing.T) {
	s, _ := newTestStore(t)
	mkChat(t, s, "0a0a")
	var evs []api.Event
	for i := range 1200 { // more than one replay batch
		evs = append(evs, api.Event{Type: api.EventAssistantText, Text: strconv.Itoa(i), MessageID: "m1"})
	}
	got, err := s.Append("0a0a", evs...)
	if err != nil {
		t.Fatal(err)
	}
	checkGapless(t, got)
	if got[0].T == 0 {
		t.Fatal("Append did not set T")
	}
	stored := allEvents(t, s, "0a0a", 0)
	if !reflect.DeepEqual(stored, got) {
		t.Fatal("replay differs from what Append returned")
	}
	tests := []struct {
		after     int64
		limit     int
		wantFirst int64
		wantN     int
	}{
		{0, 0, 1, 1200}, {-5, 0, 1, 1200}, {1, 0, 2, 1199}, {511, 0, 512, 689}, {512, 0, 513, 688},
		{1199, 0, 1200, 1}, {1200, 0, 0, 0}, {5000, 0, 0, 0}, {10, 3, 11, 3}, {0, 600, 1, 600}, {700, 1000, 701, 500},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("after %d limit %d", tt.after, tt.limit), func(t *testing.T) {
			var seqs []int64
			err := s.Events("0a0a", tt.after, tt.limit, func(ev api.Event) error { seqs = append(seqs, ev.Seq); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if len(seqs) != tt.wantN {
				t.Fatalf("got %d events, want %d", len(seqs), tt.wantN)
			}
			for i, seq := range seqs {
				if seq != tt.wantFirst+int64(i) {
					t.Fatalf("event %d has seq %d, want %d", i, seq, tt.wantFirst+int64(i))
				}
			}
		})
	}
	t.Run("raw equals encoded", func(t *testing.T) {
		i := 0
		err := s.EventsRaw("0a0a", 0, 0, func(seq int64, raw []byte) error {
			want, _ := json.Marshal(stored[i])
			if seq != stored[i].Seq || !bytes.Equal(raw, want) {
				t.Fatalf("EventsRaw %d: %d %s, want %s", i, seq, raw, want)
			}
			i++
			return nil
		})
		if err != nil || i != len(stored) {
			t.Fatalf("EventsRaw: %d events, %v", i, err)
		}
	})
	stop := errors.New("stop")
	n := 0
	if err := s.Events("0a0a", 0, 0, func(api.Event) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	}); err != stop || n != 3 { //nolint:errorlint // fn's own error comes back, unwrapped
		t.Fatalf("fn error: got %v after %d events, want stop after 3", err, n)
	}
	if last, err := s.LastSeq("0a0a"); err != nil || last != 1200 {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
	// Fork: copies with the same seqs, then continues.
	mkChat(t, s, "0b0b")
	if err := s.CopyEvents("0a0a", "0b0b"); err != nil {
		t.Fatal(err)
	}
	if err := s.CopyEvents("0a0a", "0b0b"); !errors.Is(err, ErrExists) {
		t.Fatalf("second CopyEvents: %v, want ErrExists", err)
	}
	if _, err := s.Append("0b0b", api.Event{Type: "user"}); err != nil {
		t.Fatal(err)
	}
	forked := allEvents(t, s, "0b0b", 0)
	checkGapless(t, forked)
	if len(forked) != 1201 || !reflect.DeepEqual(forked[:1200], stored) {
		t.Fatal("forked log differs from the original")
	}
}

func TestConcurrentAppendersGapless(t *testing.T) {
	s, _ := newTestStore(t)
	chats := []string{"c001", "c002", "c003", "c004"}
	for _, c := range chats {
		mkChat(t, s, c)
	}
	const writers, per = 6, 150
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]map[int64]string{}
	for _, c := range chats {
		acked[c] = map[int64]string{}
	}
	record := func(chat string, ev api.Event) {
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := acked[chat][ev.Seq]; dup {
			t.Errorf("chat %s seq %d acknowledged twice (%s, %s)", chat, ev.Seq, prev, ev.Text)
		}
		acked[chat][ev.Seq] = ev.Text
	}
	for w := range writers {
		for _, c := range chats {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var lastAsync int64
				for i := range per {
					text := fmt.Sprintf("w%d-%d", w, i)
					if i%3 == 0 {
						evs, err := s.Append(c, api.Event{Type: "assistant_text", Text: text}, api.Event{Type: "thinking", Text: text + "b"})
						if err != nil {
							t.Error(err)
							return
						}
						if evs[1].Seq != evs[0].Seq+1 {
							t.Errorf("one Append got non-consecutive seqs %d, %d", evs[0].Seq, evs[1].Seq)
						}
						record(c, evs[0])
						record(c, evs[1])
						continue
					}
					wg.Add(1)
					s.AppendAsync(c, api.Event{Type: "assistant_text", Text: text}, func(ev api.Event, err error) {
						defer wg.Done()
						if err != nil {
							t.Error(err)
							return
						}
						if ev.Seq <= lastAsync { // done runs in call order per chat
							t.Errorf("async acks out of order: %d after %d", ev.Seq, lastAsync)
						}
						lastAsync = ev.Seq
						record(c, ev)
					})
				}
			}()
		}
	}
	wg.Wait()
	for _, c := range chats {
		stored := allEvents(t, s, c, 0)
		checkGapless(t, stored)
		if len(stored) != len(acked[c]) {
			t.Fatalf("chat %s: %d stored, %d acknowledged", c, len(stored), len(acked[c]))
		}
		for _, ev := range stored {
			if acked[c][ev.Seq] != ev.Text {
				t.Fatalf("chat %s seq %d: stored %q, acknowledged %q", c, ev.Seq, ev.Text, acked[c][ev.Seq])
			}
		}
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	s := openTest(t, path)
	mkChat(t, s, "dead")
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSecret("web", "K", "v"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 500 { // queued, not yet acknowledged: Close must flush them
		wg.Add(1)
		s.AppendAsync("dead", api.Event{Type: "assistant_text", Text: strconv.Itoa(i)}, func(_ api.Event, err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Append("dead", api.Event{Type: "user"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Chats(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Chats after Close: %v, want ErrClosed", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("store file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	s2 := openTest(t, path)
	defer s2.Close()
	evs := allEvents(t, s2, "dead", 0)
	checkGapless(t, evs)
	if len(evs) != 500 || evs[499].Text != "499" {
		t.Fatalf("after reopen: %d events", len(evs))
	}
	if secs, err := s2.Secrets("web"); err != nil || len(secs) != 1 || secs[0].Value != "v" {
		t.Fatalf("secrets after reopen: %v, %v", secs, err)
	}
	if _, err := s2.Chat("dead"); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaNewerRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	s := openTest(t, path)
	if err := s.update(func(tx *boltTx) error { return tx.Bucket(bucketMeta).Put(keySchema, u64(SchemaVersion()+1)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(path, Options{Key: testKey})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

// childCrash appends to two chats as fast as it can and prints one line per
// acknowledged event ("ack CHAT SEQ TEXT") until it is killed.
func childCrash(path string) {
	s, err := Open(path, Options{Key: testKey})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	ack := func(chat string) func(api.Event, error) {
		return func(ev api.Event, err error) {
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			mu.Lock()
			fmt.Fprintf(out, "ack %s %d %s\n", chat, ev.Seq, ev.Text)
			out.Flush()
			mu.Unlock()
		}
	}
	for _, c := range []string{"aaaa", "bbbb"} {
		if err := s.CreateChat(api.Chat{ID: c}); err != nil && !errors.Is(err, ErrExists) {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	go func() {
		for i := 0; ; i++ {
			evs, err := s.Append("bbbb", api.Event{Type: "user", Text: "b" + strconv.Itoa(i)})
			ack("bbbb")(api.Event{Seq: evs[0].Seq, Text: evs[0].Text}, err)
		}
	}()
	for i := 0; ; i++ {
		s.AppendAsync("aaaa", api.Event{Type: "assistant_text", Text: "a" + strconv.Itoa(i)}, ack("aaaa"))
	}
}

func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$", path)
	cmd.Env = append(os.Environ(), childEnv+"=crash")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]map[int64]string{"aaaa": {}, "bbbb": {}}
	sc := bufio.NewScanner(stdout)
	n := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ack" {
			t.Fatalf("child printed %q", sc.Text())
		}
		seq, _ := strconv.ParseInt(f[2], 10, 64)
		acked[f[1]][seq] = f[3]
		if n++; n == 3000 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Acks printed between our last read and the kill count too.
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 4 {
			seq, _ := strconv.ParseInt(f[2], 10, 64)
			acked[f[1]][seq] = f[3]
		}
	}
	cmd.Wait()
	if n < 3000 {
		t.Fatalf("child stopped after %d acks", n)
	}
	s := openTest(t, path)
	defer s.Close()
	for chat, want := range acked {
		stored := allEvents(t, s, chat, 0)
		checkGapless(t, stored)
		for seq, text := range want {
			if seq > int64(len(stored)) {
				t.Fatalf("chat %s: acknowledged seq %d lost (only %d stored)", chat, seq, len(stored))
			}
			if stored[seq-1].Text != text {
				t.Fatalf("chat %s seq %d: stored %q, acknowledged %q", chat, seq, stored[seq-1].Text, text)
			}
		}
		t.Logf("chat %s: %d acknowledged, %d stored", chat, len(want), len(stored))
	}
}

// childLock opens the store, says so, and holds it until stdin closes.
func childLock(path string) {
	s, err := Open(path, Options{Key: testKey})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("open")
	bufio.NewReader(os.Stdin).ReadString('\n')
	s.Close()
	os.Exit(0)
}

func TestOpenLockedByAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$", path)
	cmd.Env = append(os.Environ(), childEnv+"=lock")
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	_, err = Open(path, Options{Key: testKey})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, path) // free again
	s.Close()
}

// TestMigrations: pending migrations run in order in one transaction at
// Open; a failing one rolls all of them back and leaves the version alone.
func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "remote.db")
	openTest(t, path).Close()
	orig := migrations
	t.Cleanup(func() { migrations = orig })

	var ran []string
	step := func(name string, fail bool) migration {
		return func(tx *boltTx) error {
			ran = append(ran, name)
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return err
			}
			if fail {
				return errors.New("step " + name + " failed")
			}
			return nil
		}
	}
	schemaAndBuckets := func() (uint64, bool, bool) {
		s := openTest(t, path)
		defer s.Close()
		var v uint64
		var a, b bool
		s.view(func(tx *boltTx) error {
			v = binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keySchema))
			a, b = tx.Bucket([]byte("m2")) != nil, tx.Bucket([]byte("m3")) != nil
			return nil
		})
		return v, a, b
	}

	migrations = append(append([]migration{}, orig...), step("m2", false), step("m3", true))
	_, err := Open(path, Options{Key: testKey})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("migrate schema %d to %d", len(orig)+1, len(orig)+2)) || !strings.Contains(err.Error(), "step m3 failed") {
		t.Fatalf("Open with a failing migration: %v", err)
	}
	if want := []string{"m2", "m3"}; !reflect.DeepEqual(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	migrations = orig
	if v, a, b := schemaAndBuckets(); v != uint64(len(orig)) || a || b {
		t.Fatalf("after failed migration: schema %d, m2 bucket %v, m3 bucket %v; want %d, none", v, a, b, len(orig))
	}

	ran = nil
	migrations = append(append([]migration{}, orig...), step("m2", false), step("m3", false))
	if v, a, b := schemaAndBuckets(); v != uint64(len(orig))+2 || !a || !b {
		t.Fatalf("after migration: schema %d, buckets %v %v", v, a, b)
	}
	ran = nil
	if v, _, _ := schemaAndBuckets(); v != uint64(len(orig))+2 || len(ran) != 0 {
		t.Fatalf("reopen re-ran migrations %v (schema %d)", ran, v)
	}
}
