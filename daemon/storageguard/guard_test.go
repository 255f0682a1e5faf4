package storageguard

import "testing"

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 64 << 10: "64 KiB", 1536 << 10: "1.5 MiB", 256 << 20: "256 MiB", 1 << 30: "1 GiB", 5 << 40: "5 TiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestFormatBytesUnitEdges: exactly 1 MiB is "1 MiB", not "1024 KiB"; the
// largest unit is PiB (1 EiB is "1024 PiB").
func TestFormatBytesUnitEdges(t *testing.T) {
	for n, want := range map[int64]string{1 << 20: "1 MiB", 1 << 40: "1 TiB", 1 << 50: "1 PiB", 1 << 60: "1024 PiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
