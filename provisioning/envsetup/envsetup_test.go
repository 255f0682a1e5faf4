package envsetup

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"remote/api"
	"remote/internal/errdefs"
)

var secretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString

// TestCheck: what an environment of the project API may say, each
// refusal an invalid argument naming its field.
func TestCheck(t *testing.T) {
	long := strings.Repeat("x", maxEnvScript+1)
	for _, c := range []struct {
		env  api.ProjectEnvironment
		want string // "" = accepted
	}{
		{api.ProjectEnvironment{Setup: "pip install -r requirements.txt", SetupSecrets: []string{"PIP_TOKEN"}, CacheFiles: []string{"requirements.txt", "a/b.lock"}}, ""},
		{api.ProjectEnvironment{}, ""},
		{api.ProjectEnvironment{Setup: long}, "environment.setup"},
		{api.ProjectEnvironment{Maintenance: long}, "environment.setup and environment.maintenance"},
		{api.ProjectEnvironment{SetupSecrets: []string{"GIT_TOKEN"}}, "repository's tokenSecret"},
		{api.ProjectEnvironment{SetupSecrets: []string{"bad name"}}, "environment.setupSecrets"},
		{api.ProjectEnvironment{CacheFiles: []string{"/etc/passwd"}}, "environment.cacheFiles"},
		{api.ProjectEnvironment{CacheFiles: []string{"a/../../etc"}}, "environment.cacheFiles"},
		{api.ProjectEnvironment{CacheFiles: []string{""}}, "environment.cacheFiles"},
		{api.ProjectEnvironment{CacheFiles: make([]string, maxEnvCacheFiles+1)}, "at most 32 files"},
		{api.ProjectEnvironment{Network: &api.EnvironmentNetwork{Allow: []string{"pypi.org", "*.pythonhosted.org:443"}}}, ""},
		{api.ProjectEnvironment{Network: &api.EnvironmentNetwork{Allow: []string{"http://evil@pypi.org/"}}}, "environment.network.allow"},
		{api.ProjectEnvironment{Network: &api.EnvironmentNetwork{Allow: make([]string, maxEnvAllow+1)}}, "at most 64 entries"},
		{api.ProjectEnvironment{Network: &api.EnvironmentNetwork{Allow: []string{"refused.example"}}}, "environment.network.allow: no refused.example"},
	} {
		err := Check(c.env, secretName, "GIT_TOKEN", func(h string) error {
			if h == "refused.example" {
				return errors.New("no " + h)
			}
			return nil
		})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v refused: %v", c.env.CacheFiles, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !errdefs.IsInvalidArgument(err)):
			t.Errorf("want %q, got %v", c.want, err)
		}
	}
	if !Empty(nil) || !Empty(&api.ProjectEnvironment{Setup: " \n", SetupSecrets: []string{"A"}}) || Empty(&api.ProjectEnvironment{Maintenance: "x"}) {
		t.Error("Empty")
	}
}

// TestSnapshotName: env-<first 32 hex digits of the key>.
func TestSnapshotName(t *testing.T) {
	key := strings.Repeat("ab", 32)
	if got := envSnapshot(key); got != "env-"+key[:32] {
		t.Errorf("envSnapshot = %q", got)
	}
}
