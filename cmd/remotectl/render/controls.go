package render

import (
	"strings"
	"unicode/utf8"
)

// StripControls removes what a terminal would act on from text an agent
// (or anyone upstream of it) wrote: escape sequences (CSI such as colours
// or ESC[8m hidden text, OSC such as title changes or OSC 52 clipboard
// writes, DCS/SOS/PM/APC strings, two-byte escapes), C1 controls
// (U+0080–U+009F, whose CSI and OSC introducers start sequences too),
// DEL, invalid UTF-8 and every C0 control but newline and tab. Carriage
// returns go too: they can overwrite what a line showed. Each call stands
// alone: a sequence split across two calls loses its introducer in the
// first, so the rest prints as plain text and does nothing.
func StripControls(s string) string {
	if !needsStripping(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			i++ // invalid UTF-8: a raw byte 0x80–0x9f would be a C1 control
		case r == 0x1b:
			i = skipEscape(s, i+1)
		case r == 0x9b: // C1 CSI
			i = skipCSI(s, i+size)
		case r == 0x90 || r == 0x98 || r == 0x9d || r == 0x9e || r == 0x9f: // C1 DCS, SOS, OSC, PM, APC
			i = skipString(s, i+size)
		case r == '\n' || r == '\t':
			b.WriteRune(r)
			i += size
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			i += size
		default:
			b.WriteString(s[i : i+size])
			i += size
		}
	}
	return b.String()
}

// needsStripping is the fast path: most text has nothing to remove.
func needsStripping(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size <= 1) || (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return true
		}
		i += size
	}
	return false
}

// skipEscape returns the index after the escape sequence whose ESC ended
// just before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	switch s[i] {
	case '[':
		return skipCSI(s, i+1)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC: a string up to its terminator
		return skipString(s, i+1)
	}
	// nF escapes: intermediates 0x20–0x2f, then one final byte 0x30–0x7e.
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x2f {
		i++
	}
	if i < len(s) && s[i] >= 0x30 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipCSI skips a control sequence's parameter (0x30–0x3f) and
// intermediate (0x20–0x2f) bytes and its final byte (0x40–0x7e).
func skipCSI(s string, i int) int {
	for i < len(s) && s[i] >= 0x20 && s[i] <= 0x3f {
		i++
	}
	if i < len(s) && s[i] >= 0x40 && s[i] <= 0x7e {
		i++
	}
	return i
}

// skipString skips a control string up to and including its terminator:
// BEL, ESC \ or C1 ST (U+009C). An unterminated string runs to the end.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b:
			if i+1 < len(s) && s[i+1] == '\\' {
				return i + 2
			}
			return i // ESC aborts the string and starts a sequence of its own
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}
