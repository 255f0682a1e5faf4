package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a byte count written in TOML as a string with an optional unit,
// such as "256MiB", "1 GiB", "64KiB", "500MB" or "4096", or as an integer
// number of bytes. KiB, MiB, GiB and TiB (and K, M, G, T) are powers of
// 1024; kB, MB, GB and TB powers of 1000; units ignore case. "0" is zero,
// which the keys that take a Size read as "off".
type Size int64

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
}

// ParseSize parses a Size string.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	v, err := strconv.ParseFloat(num, 64)
	if num == "" || !ok || err != nil {
		return 0, fmt.Errorf("invalid size %q: want a byte count such as \"256MiB\", \"1GiB\" or \"4096\"", s)
	}
	b := math.Floor(v * mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(b), nil
}

// UnmarshalText parses a size string (see Size).
func (z *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*z = v
	return nil
}

// UnmarshalTOML accepts a size string or a non-negative integer of bytes.
func (z *Size) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		return z.UnmarshalText([]byte(v))
	case int64:
		if v < 0 {
			return fmt.Errorf("invalid size %d: must not be negative", v)
		}
		*z = Size(v)
		return nil
	}
	return fmt.Errorf("must be a size string such as \"256MiB\" or an integer of bytes, not %s", tomlType(v))
}

// MarshalText writes the size in the largest binary unit that divides it
// exactly ("256MiB"), else in bytes.
func (z Size) MarshalText() ([]byte, error) { return []byte(z.String()), nil }

// String is the MarshalText form.
func (z Size) String() string {
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if z != 0 && int64(z)%u.n == 0 {
			return strconv.FormatInt(int64(z)/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(int64(z), 10)
}
