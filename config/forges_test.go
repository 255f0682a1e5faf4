package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestForgeDefaults: github.com and gitlab.com are known without a file;
// a file overrides a default's api alone, and adds its own hosts.
func TestForgeDefaults(t *testing.T) {
	want := map[string]Forge{
		"github.com": {Kind: "github", API: "https://api.github.com"},
		"gitlab.com": {Kind: "gitlab", API: "https://gitlab.com/api/v4"},
	}
	if got := Default().Forges; !reflect.DeepEqual(got, want) {
		t.Errorf("Default().Forges = %v, want %v", got, want)
	}
	c := mustParse(t, `[forges."gitlab.com"]
api = "https://gitlab.com/api/v4/"

[forges."github.com"]
api = "https://ghe.example.com/api/v3"

[forges."gitea.example.com:3000"]
kind = "gitea"
api = "https://gitea.example.com:3000/api/v1"
`)
	want = map[string]Forge{
		"github.com":             {Kind: "github", API: "https://ghe.example.com/api/v3"},
		"gitlab.com":             {Kind: "gitlab", API: "https://gitlab.com/api/v4/"},
		"gitea.example.com:3000": {Kind: "gitea", API: "https://gitea.example.com:3000/api/v1"},
	}
	if !reflect.DeepEqual(c.Forges, want) {
		t.Errorf("Forges = %v, want %v", c.Forges, want)
	}
	// A default host given another kind keeps no default api.
	_, err := Parse("remoted.toml", []byte("[forges.\"github.com\"]\nkind = \"gitea\"\n"))
	if err == nil || !strings.Contains(err.Error(), `remoted.toml:1: [forges."github.com"] api: must not be empty`) {
		t.Errorf("github.com as gitea without api: %v", err)
	}
}

// TestForgeRejects: each bad [forges] value is an error naming the key;
// a credential in the api URL is never echoed.
func TestForgeRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown kind", "[forges.\"git.example\"]\nkind = \"bitbucket\"\napi = \"https://git.example/api\"\n",
			`remoted.toml:2: [forges."git.example"] kind: "bitbucket" is not one of github, gitlab, gitea`},
		{"missing kind", "[forges.\"git.example\"]\napi = \"https://git.example/api\"\n",
			`[forges."git.example"] kind: "" is not one of github, gitlab, gitea`},
		{"missing api", "[forges.\"git.example\"]\nkind = \"gitea\"\n",
			`[forges."git.example"] api: must not be empty`},
		{"relative api", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"/api/v1\"\n",
			`remoted.toml:3: [forges."git.example"] api: scheme must be http or https`},
		{"file api", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"file:///etc/passwd\"\n",
			`[forges."git.example"] api: scheme must be http or https`},
		{"no host", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"https:///api/v1\"\n",
			`[forges."git.example"] api: has no host`},
		{"userinfo", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"https://u:hunter2@git.example/api/v1\"\n",
			`[forges."git.example"] api: must be scheme://host[:port][/path] only, without user, query or fragment`},
		{"query", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"https://git.example/api/v1?token=hunter2\"\n",
			`api: must be scheme://host[:port][/path] only`},
		{"upper-case host", "[forges.\"Git.Example\"]\nkind = \"gitea\"\napi = \"https://git.example/api/v1\"\n",
			`remoted.toml:1: [forges] "Git.Example": "Git.Example" is not a host name`},
		{"url as host", "[forges.\"https://git.example\"]\nkind = \"gitea\"\napi = \"https://git.example/api/v1\"\n",
			`is not a host name`},
		{"bad port", "[forges.\"git.example:0\"]\nkind = \"gitea\"\napi = \"https://git.example/api/v1\"\n",
			`is not a host name`},
		{"unknown key", "[forges.\"git.example\"]\nkind = \"gitea\"\napi = \"https://git.example/api/v1\"\ntoken = \"x\"\n",
			`remoted.toml:4: [forges."git.example"] token: unknown key`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("remoted.toml", []byte(tc.in))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tc.in)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes the credential: %v", err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("error is %T, want *config.Error", err)
			}
		})
	}
}
