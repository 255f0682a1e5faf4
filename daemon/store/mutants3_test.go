package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// Run-record, secret and key-file behaviour that mutation testing (make
// mutate) found unpinned.

// appendAt stores one event of chat with mark as its run position and waits
// for the commit.
func appendAt(t *testing.T, s *Store, chat string, m RunMark) {
	t.Helper()
	done := make(chan error, 1)
	s.AppendAsyncAt(chat, api.Event{Type: api.EventAssistantText, Text: "x"}, &m, nil, func(_ api.Event, err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A run started while another run's record (with a stored position) is
// still there replaces that record, and starts without a position: also
// when it has the same run id.
func TestPutRunReplacesAPositionedRun(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "a1a1")
	if err := s.PutRun("a1a1", RunRecord{RunID: "r1", Provider: "claude", UserSeq: 1}); err != nil {
		t.Fatal(err)
	}
	appendAt(t, s, "a1a1", RunMark{RunID: "r1", Line: 7, Index: 1})
	if rec, ok, err := s.Run("a1a1"); err != nil || !ok || !rec.HasNext || rec.Next.Line != 7 {
		t.Fatalf("Run before the replacement: %+v, %v, %v", rec, ok, err)
	}
	for _, rec := range []RunRecord{{RunID: "r2", Provider: "codex", UserSeq: 3}, {RunID: "r2", Provider: "codex", UserSeq: 5}} {
		if err := s.PutRun("a1a1", rec); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Run("a1a1")
		if err != nil || !ok || got.RunID != "r2" || got.Provider != "codex" || got.UserSeq != rec.UserSeq || got.HasNext {
			t.Fatalf("Run after PutRun(%+v): %+v, %v, %v; want that record without a position", rec, got, ok, err)
		}
		if runs, err := s.Runs(); err != nil || len(runs) != 1 || runs["a1a1"].UserSeq != rec.UserSeq || runs["a1a1"].HasNext {
			t.Fatalf("Runs after PutRun(%+v): %+v, %v", rec, runs, err)
		}
		appendAt(t, s, "a1a1", RunMark{RunID: "r2", Line: 9, Index: 2})
	}
}

// The stored position of a run only moves forward: by line, then by index
// within a line; a position of another run replaces it whatever its value.
func TestRunPositionOnlyMovesForward(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	mkChat(t, s, "a2a2")
	if err := s.PutRun("a2a2", RunRecord{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		mark RunMark
		want [2]int64 // line, index stored afterwards
	}{
		{RunMark{RunID: "r1", Line: 10, Index: 5}, [2]int64{10, 5}},
		{RunMark{RunID: "r1", Line: 10, Index: 6}, [2]int64{10, 6}},   // same line, next index
		{RunMark{RunID: "r1", Line: 10, Index: 4}, [2]int64{10, 6}},   // same line, earlier index
		{RunMark{RunID: "r1", Line: 10, Index: 6}, [2]int64{10, 6}},   // the same position again
		{RunMark{RunID: "r1", Line: 20, Index: 1}, [2]int64{20, 1}},   // later line, smaller index
		{RunMark{RunID: "r1", Line: 19, Index: 9}, [2]int64{20, 1}},   // earlier line, larger index
		{RunMark{RunID: "r1", Line: 0, Index: 1}, [2]int64{20, 1}},    // earlier line, smaller index
		{RunMark{RunID: "r0", Line: 3, Index: 3}, [2]int64{-1, -1}},   // another run's mark: not this run's position
		{RunMark{RunID: "r1", Line: 2, Index: 2}, [2]int64{2, 2}},     // after another run's, any position is taken
		{RunMark{RunID: "r1", Line: 30, Index: 0}, [2]int64{30, 0}},   // index 0 of a later line
		{RunMark{RunID: "r1", Line: 30, Index: 30}, [2]int64{30, 30}}, // equal line and index values
	}
	for i, st := range steps {
		appendAt(t, s, "a2a2", st.mark)
		rec, ok, err := s.Run("a2a2")
		if err != nil || !ok {
			t.Fatalf("step %d: Run: %v, %v", i, ok, err)
		}
		if st.want[0] < 0 {
			if rec.HasNext {
				t.Errorf("step %d (%+v): position %+v, want none for run r1", i, st.mark, rec.Next)
			}
			continue
		}
		if !rec.HasNext || rec.Next.RunID != "r1" || rec.Next.Line != st.want[0] || rec.Next.Index != st.want[1] {
			t.Errorf("step %d (%+v): position %+v (has %v), want line %d index %d", i, st.mark, rec.Next, rec.HasNext, st.want[0], st.want[1])
		}
	}
}

// fileKeys walks every bucket of the store file at path and returns each
// key and value, as "bucket/sub key=value" lines.
func fileKeys(t *testing.T, path string) []string {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	var walk func(prefix string, b *bolt.Bucket) error
	walk = func(prefix string, b *bolt.Bucket) error {
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return walk(prefix+string(k)+"/", b.Bucket(k))
			}
			out = append(out, fmt.Sprintf("%s%s=%s", prefix, k, v))
			return nil
		})
	}
	err = db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(string(name)+"/", b) })
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Stopping a chat removes its run's record and position from the store
// file, and deleting a chat leaves nothing of it there (no key or value
// naming it).
func TestStoppedAndDeletedChatsLeaveNoRunInTheFile(t *testing.T) {
	t.Parallel()
	s, path := newTestStore(t)
	mkChat(t, s, "b1b1")
	mkChat(t, s, "b2b2")
	for _, id := range []string{"b1b1", "b2b2"} {
		if _, err := s.UpdateChat(id, func(c *api.Chat) error { c.Running = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.PutRun(id, RunRecord{RunID: "run-" + id}); err != nil {
			t.Fatal(err)
		}
		appendAt(t, s, id, RunMark{RunID: "run-" + id, Line: 4, Index: 1})
	}
	if _, err := s.UpdateChat("b1b1", func(c *api.Chat) error { c.Running = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteChat("b2b2"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, kv := range fileKeys(t, path) {
		if strings.Contains(kv, "run-b1b1") {
			t.Errorf("the stopped chat's run is still in the file: %q", kv)
		}
		if strings.Contains(kv, "b2b2") {
			t.Errorf("the deleted chat is still in the file: %q", kv)
		}
	}
}

// A secret value of exactly 64 KiB (65,536 bytes) is stored and read back;
// one byte more is refused with an error saying both sizes.
func TestSecretValueOfExactly64KiB(t *testing.T) {
	t.Parallel()
	s, _ := newTestStore(t)
	if err := s.CreateProject(api.Project{Name: "web"}); err != nil {
		t.Fatal(err)
	}
	value := strings.Repeat("v", 65536)
	if err := s.PutSecret("web", "BIG", value); err != nil {
		t.Fatalf("a 65536-byte secret: %v", err)
	}
	if secs, err := s.Secrets("web"); err != nil || len(secs) != 1 || secs[0].Value != value {
		t.Fatalf("Secrets after a 65536-byte value: %d secrets, %v", len(secs), err)
	}
	err := s.PutSecret("web", "BIGGER", value+"w")
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "value of 65537 bytes exceeds 65536") || strings.Contains(err.Error(), "vvvv") {
		t.Fatalf("a 65537-byte secret: %v, want ErrInvalid saying 65537 bytes exceed 65536", err)
	}
	if keys, err := s.SecretKeys("web"); err != nil || len(keys) != 1 || keys[0].Key != "BIG" {
		t.Fatalf("SecretKeys after the refused value: %+v, %v", keys, err)
	}
}

// keyFileChildEnv makes the test binary a child that creates a key file
// with a file-size limit of 0 bytes (every write fails with EFBIG).
const keyFileChildEnv = "REMOTE_STORE_KEYFILE_CHILD"

// A key file that cannot be written (here: the file-size limit, EFBIG)
// makes LoadOrCreateKey fail and leaves no key file behind, rather than an
// empty one that every later start would refuse.
func TestKeyFileWriteFailureLeavesNoFile(t *testing.T) {
	if path := os.Getenv(keyFileChildEnv); path != "" {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: 0}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(0)
		}
		key, err := LoadOrCreateKey(path)
		_, serr := os.Lstat(path)
		fmt.Printf("key %d bytes; error %v; file exists %v\n", len(key), err, serr == nil)
		os.Exit(0)
	}
	path := filepath.Join(t.TempDir(), "secrets.key")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyFileWriteFailureLeavesNoFile$")
	cmd.Env = append(os.Environ(), keyFileChildEnv+"="+path)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v; stdout %q", err, stdout.String())
	}
	got := strings.TrimSpace(stdout.String())
	want := "key 0 bytes; error create key file " + path + ": write " + path + ": file too large; file exists false"
	if got != want {
		t.Fatalf("child printed\n  %q\nwant\n  %q", got, want)
	}
	// Without the limit the same path works: nothing was left in the way.
	if key, err := LoadOrCreateKey(path); err != nil || len(key) != 32 {
		t.Fatalf("LoadOrCreateKey after the failure: %d bytes, %v", len(key), err)
	}
}
