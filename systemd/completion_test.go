package systemd

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"remote/internal/testkit"
)

// TestBashCompletion sources remotectl.bash in a real bash and completes
// command lines, with a fake remotectl on PATH answering `chat list`.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		testkit.Missing(t, "bash")
	}
	bin := t.TempDir()
	fake := "#!/bin/sh\n" +
		"case \"$*\" in *'chat list'*) printf 'ID  PROVIDER  PROJECT\\nc-111  claude  -\\nc-222  codex  web\\n' ;; esac\n" +
		"echo \"$*\" >> \"$(dirname \"$0\")/calls\"\n"
	if err := os.WriteFile(filepath.Join(bin, "remotectl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("remotectl.bash")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string // the command line; the cursor is at its end
		want string // COMPREPLY, space-separated
	}{
		{"remotectl ", "info providers chat events prompt tail cancel help"},
		{"remotectl p", "providers prompt"},
		{"remotectl -", "-socket -config -json -raw -help"},
		{"remotectl chat ", "create list show rm fork"},
		{"remotectl chat show ", "c-111 c-222"},
		{"remotectl chat show c-111 ", ""},
		{"remotectl chat rm c-111 c-2", "c-222"},
		{"remotectl chat create -", "-json -provider -project -cwd -model -title"},
		{"remotectl chat create -provider c", "claude codex"},
		{"remotectl -socket /tmp/x.sock tail ", "c-111 c-222"},
		{"remotectl prompt c-1", "c-111"},
		{"remotectl prompt c-111 -mode ", "default plan"},
		{"remotectl events c-111 -", "-json -since -raw"},
		{"remotectl prompt c-111 -", "-mode -skill -raw"},
		{"remotectl chat create -title ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			words := strings.Fields(tt.line)
			if strings.HasSuffix(tt.line, " ") {
				words = append(words, "")
			}
			quoted := make([]string, len(words))
			for i, w := range words {
				quoted[i] = "'" + w + "'"
			}
			prog := "source '" + script + "'\n" +
				"COMP_WORDS=(" + strings.Join(quoted, " ") + ")\n" +
				"COMP_CWORD=" + strconv.Itoa(len(words)-1) + "\n" +
				"_remotectl\n" +
				"echo \"${COMPREPLY[*]}\"\n"
			cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("bash: %v\n%s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != tt.want {
				t.Errorf("complete %q = %q, want %q", tt.line, got, tt.want)
			}
		})
	}
	calls, _ := os.ReadFile(filepath.Join(bin, "calls"))
	if !strings.Contains(string(calls), "-socket /tmp/x.sock chat list") {
		t.Errorf("chat ids were not fetched with the command line's -socket; calls:\n%s", calls)
	}
}
