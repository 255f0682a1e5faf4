package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	bolt "go.etcd.io/bbolt"

	"remote/api"
)

// KeySize is the size in bytes of the secrets key (AES-256).
const KeySize = 32

type aeadCipher = cipher.AEAD

// Secret is one decrypted project secret. Its String and GoString redact
// the value so that printing a Secret never shows it.
type Secret struct{ Key, Value string }

// String returns the key with the value redacted.
func (s Secret) String() string { return s.Key + "=<redacted>" }

// GoString returns the key with the value redacted, also for %#v.
func (s Secret) GoString() string {
	return "store.Secret{Key:" + fmt.Sprintf("%q", s.Key) + ", Value:<redacted>}"
}

// sealed is a stored secret: AES-256-GCM ciphertext with its random nonce.
type sealed struct {
	UpdatedAt time.Time `json:"updatedAt"`
	Nonce     []byte    `json:"nonce"`
	Sealed    []byte    `json:"sealed"`
}

// keyCheckPlain is sealed under the key at first open, so that a later open
// with another key fails at once instead of at the first secret read.
var keyCheckPlain = []byte("remote store key check v1")

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets key: %w: %d bytes, want %d", ErrInvalid, len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return cipher.NewGCM(block)
}

// additionalData binds a ciphertext to its project and key so stored values
// cannot be swapped between secrets.
func additionalData(project, key string) []byte {
	return []byte(project + "\x00" + key)
}

func (s *Store) seal(project, key string, value []byte, now time.Time) (sealed, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := io.ReadFull(rand.Reader, nonce); err != nil {
		return sealed{}, fmt.Errorf("secret nonce: %w", err)
	}
	return sealed{UpdatedAt: now, Nonce: nonce, Sealed: s.aead.Seal(nil, nonce, value, additionalData(project, key))}, nil
}

func (s *Store) open(project, key string, v sealed) ([]byte, error) {
	if len(v.Nonce) != s.aead.NonceSize() {
		return nil, fmt.Errorf("secret %q of project %q: %w: nonce of %d bytes", key, project, ErrCorrupt, len(v.Nonce))
	}
	plain, err := s.aead.Open(nil, v.Nonce, v.Sealed, additionalData(project, key))
	if err != nil {
		return nil, fmt.Errorf("decrypt secret %q of project %q: %w (or the data is corrupt)", key, project, ErrWrongKey)
	}
	return plain, nil
}

// checkKey verifies the key against meta's key check, creating it if absent.
func (s *Store) checkKey(meta *bolt.Bucket) error {
	raw := meta.Get(keyKeyCheck)
	if raw == nil {
		v, err := s.seal("", "", keyCheckPlain, time.Now())
		if err != nil {
			return err
		}
		return putJSON(meta, keyKeyCheck, v)
	}
	var v sealed
	if err := getJSON(meta, keyKeyCheck, &v, "key check"); err != nil {
		return err
	}
	if _, err := s.open("", "", v); err != nil {
		return fmt.Errorf("check secrets key: %w", ErrWrongKey)
	}
	return nil
}

// PutSecret encrypts and stores value under key for an existing project,
// replacing an earlier value. The value never appears in errors or logs.
func (s *Store) PutSecret(project, key, value string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := checkSecretKey(key); err != nil {
		return err
	}
	if len(value) > maxSecretValue {
		return fmt.Errorf("secret %q: %w: value of %d bytes exceeds %d", key, ErrInvalid, len(value), maxSecretValue)
	}
	v, err := s.seal(project, key, []byte(value), time.Now().UTC())
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProjects).Get([]byte(project)) == nil {
			return fmt.Errorf("project %q: %w", project, ErrNotFound)
		}
		b, err := tx.Bucket(bucketSecrets).CreateBucketIfNotExists([]byte(project))
		if err != nil {
			return err
		}
		return putJSON(b, []byte(key), v)
	})
}

// SecretKeys lists the project's secret keys and their update times, sorted
// by key. It never returns values. A missing project is ErrNotFound.
func (s *Store) SecretKeys(project string) ([]api.SecretInfo, error) {
	out := []api.SecretInfo{}
	err := s.eachSecret(project, func(key string, v sealed) error {
		out = append(out, api.SecretInfo{Key: key, UpdatedAt: v.UpdatedAt})
		return nil
	})
	return out, err
}

// Secrets returns the project's secrets decrypted, sorted by key. It is the
// only way a value leaves the store. A value that does not decrypt is
// ErrWrongKey; a missing project is ErrNotFound.
func (s *Store) Secrets(project string) ([]Secret, error) {
	out := []Secret{}
	err := s.eachSecret(project, func(key string, v sealed) error {
		plain, err := s.open(project, key, v)
		if err != nil {
			return err
		}
		out = append(out, Secret{Key: key, Value: string(plain)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Store) eachSecret(project string, fn func(key string, v sealed) error) error {
	if err := checkProject(project); err != nil {
		return err
	}
	return s.view(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketProjects).Get([]byte(project)) == nil {
			return fmt.Errorf("project %q: %w", project, ErrNotFound)
		}
		b := tx.Bucket(bucketSecrets).Bucket([]byte(project))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, _ []byte) error {
			var v sealed
			if err := getJSON(b, k, &v, fmt.Sprintf("secret %q of project %q", k, project)); err != nil {
				return err
			}
			return fn(string(k), v)
		})
	})
}

// DeleteSecret removes one secret; ErrNotFound if the project or key is absent.
func (s *Store) DeleteSecret(project, key string) error {
	if err := checkProject(project); err != nil {
		return err
	}
	if err := checkSecretKey(key); err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSecrets).Bucket([]byte(project))
		if b == nil || b.Get([]byte(key)) == nil {
			return fmt.Errorf("secret %q of project %q: %w", key, project, ErrNotFound)
		}
		return b.Delete([]byte(key))
	})
}
