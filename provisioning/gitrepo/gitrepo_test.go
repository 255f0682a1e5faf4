package gitrepo

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"remote/api"
	"remote/internal/errdefs"
)

var secretRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// TestValidateRepo: http(s) URLs only, ssh refused by name, no
// credentials in the URL (and the URL holding them never echoed), a
// plain ref, a secret name. Every refusal is invalid argument naming the
// field.
func TestValidateRepo(t *testing.T) {
	ok := []api.ProjectRepo{
		{URL: "https://github.com/o/r.git"},
		{URL: "http://127.0.0.1:8080/calc.git", Ref: "main", TokenSecret: "GIT_TOKEN"},
		{URL: "https://gitlab.example.com/group/sub/r", Ref: "release/1.2"},
	}
	for _, r := range ok {
		if err := ValidateRepo(r, secretRE.MatchString); err != nil {
			t.Errorf("%+v: %v", r, err)
		}
	}
	bad := []struct {
		repo  api.ProjectRepo
		field string
	}{
		{api.ProjectRepo{}, "repo.url"},
		{api.ProjectRepo{URL: "https://x-access-token:ghp_secret123@github.com/o/r.git"}, "repo.url"},
		{api.ProjectRepo{URL: "https://ghp_secret123@github.com/o/r.git"}, "repo.url"},
		{api.ProjectRepo{URL: "git@github.com:o/r.git"}, "repo.url"},
		{api.ProjectRepo{URL: "ssh://git@github.com/o/r.git"}, "repo.url"},
		{api.ProjectRepo{URL: "file:///etc"}, "repo.url"},
		{api.ProjectRepo{URL: "ext::sh -c id"}, "repo.url"},
		{api.ProjectRepo{URL: "/srv/git/r.git"}, "repo.url"},
		{api.ProjectRepo{URL: "https://github.com/o/r.git\n"}, "repo.url"},
		{api.ProjectRepo{URL: "https://github.com/o/r.git", Ref: "--upload-pack=id"}, "repo.ref"},
		{api.ProjectRepo{URL: "https://github.com/o/r.git", Ref: "a..b"}, "repo.ref"},
		{api.ProjectRepo{URL: "https://github.com/o/r.git", TokenSecret: "BAD-NAME"}, "repo.tokenSecret"},
	}
	for _, c := range bad {
		err := ValidateRepo(c.repo, secretRE.MatchString)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), c.field) {
			t.Errorf("%+v: %v, want invalid argument naming %s", c.repo, err, c.field)
		}
		if err != nil && strings.Contains(err.Error(), "ghp_secret123") {
			t.Errorf("%+v: the error echoes the credentials: %v", c.repo, err)
		}
	}
}

// TestSanitize: git's message loses the token and URL credentials.
func TestSanitize(t *testing.T) {
	got := sanitize("fatal: unable to access 'https://u:tok123@h/r.git/': 401\ntok123 again\x1b[31m", "tok123")
	if strings.Contains(got, "tok123") || strings.ContainsRune(got, '\x1b') {
		t.Errorf("sanitize = %q", got)
	}
	if !strings.Contains(got, "https://[redacted]@h/r.git/") {
		t.Errorf("sanitize = %q", got)
	}
}

// TestGitEnv: the container's git gets no token, no credential helper
// (every configured one is reset) and no transport but a local bundle;
// the host's git gets the token only in its environment, read by the
// helper, which replaces every configured one; hooks are off in both.
func TestGitEnv(t *testing.T) {
	env := gitEnv()
	for k, v := range env {
		if strings.Contains(k, "TOKEN") || strings.Contains(v, "password") {
			t.Errorf("the container's git env has %s=%s", k, v)
		}
	}
	if env["GIT_ALLOW_PROTOCOL"] != "file" {
		t.Errorf("GIT_ALLOW_PROTOCOL = %q", env["GIT_ALLOW_PROTOCOL"])
	}
	cfg := map[string][]string{}
	for k, v := range env {
		if strings.HasPrefix(k, "GIT_CONFIG_KEY_") {
			cfg[v] = append(cfg[v], env["GIT_CONFIG_VALUE_"+strings.TrimPrefix(k, "GIT_CONFIG_KEY_")])
		}
	}
	if cfg["core.hooksPath"][0] != "/dev/null" || cfg["protocol.allow"][0] != "never" || len(cfg["credential.helper"]) != 1 || cfg["credential.helper"][0] != "" {
		t.Errorf("container config = %v", cfg)
	}

	host := map[string]string{}
	for _, kv := range hostEnv("tok123", "https://git.example.com:8443/o/r.git", "http:https") {
		k, v, _ := strings.Cut(kv, "=")
		host[k] = v
	}
	if host["REMOTE_GIT_TOKEN"] != "tok123" || host["REMOTE_GIT_HOST"] != "git.example.com:8443" || host["REMOTE_GIT_PROTOCOL"] != "https" ||
		host["GIT_ALLOW_PROTOCOL"] != "http:https" {
		t.Errorf("host env = %v", host)
	}
	hcfg := map[string][]string{}
	for k, v := range host {
		if k != "REMOTE_GIT_TOKEN" && strings.Contains(v, "tok123") {
			t.Errorf("%s holds the token", k)
		}
		if strings.HasPrefix(k, "GIT_CONFIG_KEY_") {
			hcfg[v] = append(hcfg[v], host["GIT_CONFIG_VALUE_"+strings.TrimPrefix(k, "GIT_CONFIG_KEY_")])
		}
	}
	if h := hcfg["credential.helper"]; len(h) != 2 || !strings.Contains(h[0]+h[1], `"password=$REMOTE_GIT_TOKEN"`) {
		t.Errorf("credential.helper = %q", h)
	}
	if hcfg["core.hooksPath"][0] != "/dev/null" || hcfg["transfer.fsckObjects"][0] != "true" {
		t.Errorf("host config = %v", hcfg)
	}
}

// TestParseDiff pins git's -z output as parsed: statuses, counts, binary
// files, paths with tabs and newlines.
func TestParseDiff(t *testing.T) {
	out := ":100644 100644 aaa bbb M\x00calc.py\x00:000000 100644 000 ccc A\x00new\tname\nx.txt\x00:100644 000000 ddd 000 D\x00img.png\x00" +
		"1\t1\tcalc.py\x003\t0\tnew\tname\nx.txt\x00-\t-\timg.png\x00"
	files, err := ParseDiff([]byte(out), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.DiffFile{{Path: "calc.py", Status: "M", Additions: 1, Deletions: 1},
		{Path: "new\tname\nx.txt", Status: "A", Additions: 3}, {Path: "img.png", Status: "D", Binary: true}}
	if len(files) != len(want) {
		t.Fatalf("files = %+v", files)
	}
	for i := range want {
		if files[i] != want[i] {
			t.Errorf("file %d = %+v, want %+v", i, files[i], want[i])
		}
	}
	for _, bad := range []string{":100644 M\x00a\x00", ":100644 100644 a b X\x00a\x00", "1\t1\tnothere\x00", ":100644 100644 a b M\x00", "x\t1\ta\x00"} {
		if _, err := ParseDiff([]byte(bad), 0); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestParseDiffBounds: one file more than the bound, or a path one byte
// longer than MaxDiffPathBytes, is a *TooLargeError naming the bound;
// exactly the bounds parse.
func TestParseDiffBounds(t *testing.T) {
	rec := func(path string) string { return ":000000 100644 000 ccc A\x00" + path + "\x00" }
	three := rec("a") + rec("b") + rec("c")
	if files, err := ParseDiff([]byte(three), 3); err != nil || len(files) != 3 {
		t.Errorf("three files, bound 3: %d files, %v", len(files), err)
	}
	var tl *TooLargeError
	if _, err := ParseDiff([]byte(three), 2); !errors.As(err, &tl) || err.Error() != "the diff lists more than 2 files" {
		t.Errorf("three files, bound 2: %v", err)
	}
	long := strings.Repeat("d/", MaxDiffPathBytes/2-1) + "ab" // MaxDiffPathBytes bytes
	if files, err := ParseDiff([]byte(rec(long)+"1\t0\t"+long+"\x00"), 0); err != nil || len(files) != 1 || files[0].Additions != 1 {
		t.Errorf("a path of %d bytes: %+v, %v", len(long), files, err)
	}
	if _, err := ParseDiff([]byte(rec(long+"c")), 0); !errors.As(err, &tl) || err.Error() != "the diff holds a path longer than 4096 bytes" {
		t.Errorf("a path of %d bytes: %v", len(long)+1, err)
	}
	if _, err := ParseDiff([]byte("1\t0\t"+long+long+"\x00"), 0); !errors.As(err, &tl) {
		t.Errorf("a numstat record of %d bytes: %v", 2*len(long), err)
	}
}

// FuzzParseDiff: any input is parsed or refused, never a panic; a parse
// has only non-empty paths, git's statuses and non-negative counts.
func FuzzParseDiff(f *testing.F) {
	f.Add([]byte(":100644 100644 aaa bbb M\x00calc.py\x001\t1\tcalc.py\x00"))
	f.Add([]byte(":000000 100644 000 ccc A\x00img.png\x00-\t-\timg.png\x00"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\x00:"))
	f.Fuzz(func(t *testing.T, b []byte) {
		files, err := ParseDiff(b, 0)
		if err != nil {
			return
		}
		for _, fl := range files {
			if fl.Path == "" || len(fl.Status) != 1 || !strings.Contains("AMDT", fl.Status) || fl.Additions < 0 || fl.Deletions < 0 {
				t.Fatalf("bad file %+v from %q", fl, b)
			}
		}
	})
}

// TestParseSymref: the default branch is the refs/heads/ target of the
// HEAD symref line; anything else (a detached HEAD, another symref, a
// name git would refuse) is no branch.
func TestParseSymref(t *testing.T) {
	for out, want := range map[string]string{
		"ref: refs/heads/main\tHEAD\n0123456789abcdef0123456789abcdef01234567\tHEAD\n": "main",
		"ref: refs/heads/release/2.x\tHEAD\n":                                          "release/2.x",
		"0123456789abcdef0123456789abcdef01234567\tHEAD\n":                             "",
		"ref: refs/tags/v1\tHEAD\n":                                                    "",
		"ref: refs/heads/main\trefs/remotes/origin/HEAD\n":                             "",
		"ref: refs/heads/-x\tHEAD\n":                                                   "",
		"ref: refs/heads/a..b\tHEAD\n":                                                 "",
		"":                                                                             "",
	} {
		got, ok := parseSymref(out)
		if got != want || ok != (want != "") {
			t.Errorf("parseSymref(%q) = %q, %v; want %q", out, got, ok, want)
		}
	}
}

// FuzzParseSymref: any output gives no branch or one matching the ref
// rule, never a panic.
func FuzzParseSymref(f *testing.F) {
	f.Add("ref: refs/heads/main\tHEAD\n")
	f.Add("ref: refs/heads/\tHEAD")
	f.Add("ref: \t\n")
	f.Fuzz(func(t *testing.T, out string) {
		b, ok := parseSymref(out)
		if ok && !ValidRef(b) {
			t.Fatalf("branch %q from %q", b, out)
		}
	})
}
