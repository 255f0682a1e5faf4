package probe

import "testing"

func TestRedactLoginMessage(t *testing.T) {
	for in, want := range map[string]string{
		"Couldn't log in: getaddrinfo ENOTFOUND platform.claude.com":           "Couldn't log in: getaddrinfo ENOTFOUND platform.claude.com",
		"bad token eyJhbGciOiJub25lIn0.eyJlbWFpbCI6InRAZXhhbXBsZS5jb20ifQ.sig": "bad token [redacted]",
		"revoke it at https://claude.ai/settings/security\nsecond line":        "revoke it at https://claude.ai/settings/security",
		"key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789":                "key [redacted]",
	} {
		if got := RedactLoginMessage(in); got != want {
			t.Errorf("RedactLoginMessage(%q) = %q, want %q", in, got, want)
		}
	}
	if got := cleanLine("\x1b[94mABCD-1234\x1b[0m\r"); got != "ABCD-1234" {
		t.Errorf("cleanLine = %q", got)
	}
}

// A login message keeps only its first line, even an empty one.
func TestRedactLoginMessageEmptyFirstLine(t *testing.T) {
	if got := RedactLoginMessage("\nsk-ant-secret on the second line"); got != "" {
		t.Fatalf("RedactLoginMessage = %q, want the empty first line", got)
	}
}
