package store

import (
	"fmt"

	"remote/internal/lazyre"
)

var (
	chatIDRe     = lazyre.New(`^[0-9a-f]{4,32}$`)
	projectRe    = lazyre.New(`^[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)
	secretKeyRe  = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)
	maxSecretKey = 256
)

// maxSecretValue bounds one secret value.
const maxSecretValue = 64 << 10

// ValidChatID reports whether id is a chat id: 4–32 lowercase hex characters.
func ValidChatID(id string) bool { return chatIDRe.MatchString(id) }

// ValidProjectName reports whether name is usable as a project (and LXD
// instance) name: 1–63 letters, digits and hyphens, starting with a letter
// and not ending with a hyphen.
func ValidProjectName(name string) bool { return projectRe.MatchString(name) }

// ValidSecretKey reports whether key is a secret (environment variable) name:
// ^[A-Za-z_][A-Za-z0-9_]*$, at most 256 characters.
func ValidSecretKey(key string) bool {
	return len(key) <= maxSecretKey && secretKeyRe.MatchString(key)
}

func checkChatID(id string) error {
	if !ValidChatID(id) {
		return fmt.Errorf("chat id %q: %w: want 4-32 lowercase hex characters", clip(id), ErrInvalid)
	}
	return nil
}

func checkProject(name string) error {
	if !ValidProjectName(name) {
		return fmt.Errorf("project name %q: %w: want 1-63 letters, digits or hyphens, starting with a letter, not ending with a hyphen", clip(name), ErrInvalid)
	}
	return nil
}

func checkSecretKey(key string) error {
	if !ValidSecretKey(key) {
		return fmt.Errorf("secret key %q: %w: want ^[A-Za-z_][A-Za-z0-9_]*$", clip(key), ErrInvalid)
	}
	return nil
}

// clip bounds user input quoted in error messages.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
