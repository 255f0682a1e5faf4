package checkpoint

import "testing"

func TestCheckpointNames(t *testing.T) {
	name := Name("0123456789ab", 42)
	if name != "rc-0123456789ab-42" {
		t.Fatalf("Name = %q", name)
	}
	if chat, seq, ok := ParseCheckpoint(name); !ok || chat != "0123456789ab" || seq != 42 {
		t.Fatalf("ParseCheckpoint(%q) = %q %d %v", name, chat, seq, ok)
	}
	for _, bad := range []string{"", "snap0", "rc-", "rc-abc", "rc-abc-0", "rc-abc--1", "rc-ABC-1", "rc-abc-1x", "rc--1", "x-abc-1"} {
		if _, _, ok := ParseCheckpoint(bad); ok {
			t.Errorf("ParseCheckpoint(%q) accepted", bad)
		}
	}
}
