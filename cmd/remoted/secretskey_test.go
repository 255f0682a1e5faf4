package main

import (
	"os"
	"path/filepath"
	"testing"

	"remote/config"
)

// TestFaultMissingSecretsKeyFile: the unit's LoadCredential= file is
// missing, so systemd hands over the unit's SetCredential= fallback. The
// daemon refuses to start with an error naming the missing file and the
// command that creates it (before, systemd failed with "Failed to set up
// credentials: Protocol error" and nothing said which file).
func TestFaultMissingSecretsKeyFile(t *testing.T) {
	creds := t.TempDir()
	if err := os.WriteFile(filepath.Join(creds, "secrets-key"), []byte("remoted-secrets-key-file-missing"), 0o400); err != nil {
		t.Fatal(err)
	}
	_, err := loadSecretsKey(config.Daemon{}, creds)
	want := "the secrets key file is missing: systemd could not load the credential secrets-key from the unit's LoadCredential= file " +
		"(/etc/remote/secrets.key unless a drop-in changed it); create it with: remoted -init-secrets-key /etc/remote/secrets.key"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}
