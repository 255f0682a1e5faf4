package provisioning

import (
	"strings"
	"testing"
)

// FuzzAPIKeyAuth: any bytes decide without panicking, and only a record
// with an auth_mode (API-key authentication) or an OPENAI_API_KEY (without
// ChatGPT tokens) is refused, as codex.CheckAuthRecord does (S13).
func FuzzAPIKeyAuth(f *testing.F) {
	for _, s := range []string{
		`{"auth_mode":"apikey"}`, `{"auth_mode":"ApiKey"}`, `{"auth_mode":"api_key","OPENAI_API_KEY":"sk"}`,
		`{"auth_mode":"chatgpt"}`, `{"OPENAI_API_KEY":"sk-x"}`, `{}`, `[]`, `not json`, `{"auth_mode":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := apiKeyAuth(b)
		lower := strings.ToLower(string(b))
		if got && !strings.Contains(lower, "auth_mode") && !strings.Contains(lower, "openai_api_key") {
			t.Fatalf("refused a record without auth_mode or OPENAI_API_KEY: %q", b)
		}
	})
}

// FuzzValidSkillName: an accepted skill name is always one safe path
// element.
func FuzzValidSkillName(f *testing.F) {
	for _, s := range []string{"demo", "scheduled-tasks", "a.b_c", "../x", "a/b", ".hidden", "", "..", "x\x00", strings.Repeat("a", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidSkillName(name) {
			return
		}
		if strings.ContainsAny(name, "/\\\x00") || strings.HasPrefix(name, ".") || strings.Contains(name, "..") || len(name) > 128 {
			t.Fatalf("accepted unsafe skill name %q", name)
		}
		if containerJoin(SkillsRoot, name) != SkillsRoot+"/"+name {
			t.Fatalf("skill %q escapes %s", name, SkillsRoot)
		}
	})
}
