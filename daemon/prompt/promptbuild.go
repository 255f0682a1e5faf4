package prompt

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"remote/api"
	"remote/internal/errdefs"
	"remote/internal/hostfs"
	"remote/internal/lazyre"
	"remote/providers"
)

// DefaultTranscriptBytes bounds the visible history prepended to a prompt
// that has no native session to resume (S6).
const DefaultTranscriptBytes = 24000

// visibleTranscript renders the user and assistant text of events (never
// tool output or reasoning) as a plain transcript, assistant pieces joined
// per turn.
func visibleTranscript(events []api.Event) string {
	var out, assistant strings.Builder
	flush := func() {
		if text := strings.TrimSpace(assistant.String()); text != "" {
			out.WriteString("Assistant:\n")
			out.WriteString(text)
			out.WriteString("\n\n")
		}
		assistant.Reset()
	}
	for _, ev := range events {
		switch ev.Type {
		case api.EventUser:
			flush()
			if text := strings.TrimSpace(ev.Text); text != "" {
				out.WriteString("User:\n")
				out.WriteString(text)
				out.WriteString("\n\n")
			}
		case api.EventAssistantText:
			assistant.WriteString(ev.Text)
		}
	}
	flush()
	return strings.TrimSpace(out.String())
}

// tailUTF8 returns the last at most max bytes of s, starting on a rune
// boundary so the result is valid UTF-8 when s is.
func tailUTF8(s string, max int) string {
	if max <= 0 {
		return ""
	}
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// promptWithHistory prepends the bounded visible transcript of history to
// prompt (S6). An empty history leaves the prompt unchanged.
func promptWithHistory(history []api.Event, prompt string, maxBytes int) string {
	transcript := visibleTranscript(history)
	if transcript == "" {
		return prompt
	}
	if len(transcript) > maxBytes {
		transcript = "[Earlier visible transcript omitted]\n" + tailUTF8(transcript, maxBytes)
	}
	return "Use this visible chat transcript as prior context. It may be present because the chat was recovered into a fresh agent session. Do not treat the transcript as a new request.\n\n" +
		transcript + "\n\nCurrent user request:\n" + prompt
}

// skillName is what a skill may be called: no path separators, no dots at
// the start, nothing a shell or a path could misread.
var skillName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// validateSkills rejects path-like names and, when dir is set, names with
// no dir/<name>/SKILL.md. Without a skills directory no skill is known.
func validateSkills(names []string, dir string) error {
	seen := map[string]bool{}
	for i, name := range names {
		if !skillName.MatchString(name) {
			return errdefs.InvalidArgument("skills[%d]: invalid skill name %q (letters, digits, '-' and '_' only)", i, name)
		}
		if seen[name] {
			return errdefs.InvalidArgument("skills[%d]: skill %q selected twice", i, name)
		}
		seen[name] = true
		if dir == "" {
			return errdefs.InvalidArgument("skills[%d]: unknown skill %q (no skills directory configured)", i, name)
		}
		// Read as provisioning publishes it: beneath dir, no symlinks,
		// owned by dir's owner (provisioning.operatorRoot).
		if !(hostfs.Root{Dir: dir, Owner: hostfs.OwnerOfDir}).IsFile(name + "/SKILL.md") {
			return errdefs.InvalidArgument("skills[%d]: unknown skill %q", i, name)
		}
	}
	return nil
}

// ContainerSkillsRoot is where a project's container holds the published
// skills (provisioning.SkillsRoot): the `instructions` strategy of a
// project chat points there, not at the host's skills_dir (S7).
const ContainerSkillsRoot = "/workspace/.agents/skills"

// skillsDirFor is where the chat's agent reads SKILL.md files: inside the
// container for a project chat, else the host's skills directory.
func skillsDirFor(chat api.Chat, hostDir string) string {
	if chat.Project != "" {
		return ContainerSkillsRoot
	}
	return hostDir
}

// promptWithSkills applies the provider's declared skill strategy (S7).
func promptWithSkills(strategy providers.SkillsStrategy, skills []string, dir, prompt string) string {
	if len(skills) == 0 {
		return prompt
	}
	switch strategy {
	case providers.SkillsSlashCommand:
		triggers := make([]string, len(skills))
		for i, s := range skills {
			triggers[i] = "/" + s
		}
		return strings.Join(triggers, " ") + "\n\n" + prompt
	case providers.SkillsDollarMention:
		mentions := make([]string, len(skills))
		for i, s := range skills {
			mentions[i] = "$" + s
		}
		return "Use these skills: " + strings.Join(mentions, ", ") + ".\n\n" + prompt
	case providers.SkillsInstructions:
		var b strings.Builder
		b.WriteString("Before you start, read and follow these skill instructions:\n")
		for _, s := range skills {
			fmt.Fprintf(&b, "- %s\n", filepath.Join(dir, s, "SKILL.md"))
		}
		return b.String() + "\n" + prompt
	default:
		return prompt
	}
}
