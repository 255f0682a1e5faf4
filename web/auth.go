package web

import (
	"container/list"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"remote/api"
	"remote/internal/lazyre"
)

// Errors of authentication. They are classes for callers to test with
// errors.Is; none of them is ever shown to a browser in a way that tells a
// wrong user name from a wrong password.
var (
	// ErrBadCredentials means the user name or the password did not match.
	ErrBadCredentials = errors.New("invalid username or password")
	// ErrNoSession means the request carries no valid, unexpired session.
	ErrNoSession = errors.New("no valid session")
	// ErrTossedCookie means a request carried more than one session
	// cookie: another site of the same registrable domain set one
	// (cookie tossing), and neither can be trusted.
	ErrTossedCookie = errors.New("more than one session cookie")
	// ErrUserLimit classes a *LimitError: one user holds as many of
	// something (sessions, previews) as one user may.
	ErrUserLimit = errors.New("per-user limit reached")
	// ErrBadUser means a configured user is unusable (empty name, duplicate,
	// or a password hash that is not bcrypt).
	ErrBadUser = errors.New("bad web user")
)

// LimitError is a refusal because one user is at a per-user limit; other
// users are not affected. Wait is how long until one of theirs ends.
type LimitError struct {
	What, Hint string
	Limit      int
	Wait       time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("too many %s for this user (limit %d): %s", e.What, e.Limit, e.Hint)
}

// Is makes errors.Is(err, ErrUserLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrUserLimit }

// userName is what the daemon accepts in X-Remote-User (daemon/access.go);
// a configured user outside it could log in but never use the API.
var userName = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$`)

// maxPasswordBytes is bcrypt's input limit; longer passwords are refused
// rather than silently truncated.
const maxPasswordBytes = 72

// users checks passwords against bcrypt hashes from config.
type users struct {
	hashes map[string][]byte
	// dummy is compared against when the user is unknown, so an unknown
	// name costs about as much time as a wrong password.
	dummy []byte
}

func newUsers(list []User) (*users, error) {
	u := &users{hashes: make(map[string][]byte, len(list))}
	for i, usr := range list {
		if !userName.MatchString(usr.Name) {
			return nil, fmt.Errorf("%w: users[%d] name %q: want letters, digits and . _ @ + - (starting with a letter or digit, at most 128), the names the daemon accepts in %s", ErrBadUser, i, usr.Name, api.HeaderUser)
		}
		if _, dup := u.hashes[usr.Name]; dup {
			return nil, fmt.Errorf("%w: users[%d] %q is listed twice", ErrBadUser, i, usr.Name)
		}
		if _, err := bcrypt.Cost([]byte(usr.PasswordHash)); err != nil {
			return nil, fmt.Errorf("%w: users[%d] %q: password_hash is not a bcrypt hash (make one with remote-web -hash-password): %w", ErrBadUser, i, usr.Name, err)
		}
		u.hashes[usr.Name] = []byte(usr.PasswordHash)
	}
	cost := bcrypt.DefaultCost
	for _, h := range u.hashes {
		if c, err := bcrypt.Cost(h); err == nil {
			cost = c
			break
		}
	}
	d, err := bcrypt.GenerateFromPassword(randomBytes(16), cost)
	if err != nil {
		return nil, fmt.Errorf("make dummy bcrypt hash with cost %d: %w", cost, err)
	}
	u.dummy = d
	return u, nil
}

// check reports nil when name and password match a configured user.
func (u *users) check(name, password string) error {
	if len(password) > maxPasswordBytes || len(name) > 256 {
		_ = bcrypt.CompareHashAndPassword(u.dummy, []byte("x"))
		return ErrBadCredentials
	}
	h, ok := u.hashes[name]
	if !ok {
		_ = bcrypt.CompareHashAndPassword(u.dummy, []byte(password))
		return ErrBadCredentials
	}
	if bcrypt.CompareHashAndPassword(h, []byte(password)) != nil {
		return ErrBadCredentials
	}
	return nil
}

// HashPassword returns a bcrypt hash of password for [[web.users]]
// password_hash. It refuses empty passwords and passwords over 72 bytes.
func HashPassword(password []byte) (string, error) {
	if len(password) == 0 {
		return "", errors.New("hash password: empty password")
	}
	if len(password) > maxPasswordBytes {
		return "", fmt.Errorf("hash password: %d bytes is over bcrypt's limit of %d", len(password), maxPasswordBytes)
	}
	h, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	return string(h), nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never returns an error on Linux
	}
	return b
}

// session is one logged-in browser.
type session struct {
	user    string
	expires time.Time
}

// sessions is the server-side session table. Tokens are 32 random bytes;
// only their SHA-256 is kept, so a dump of memory does not yield cookies.
// Each user holds at most max live sessions, so the table is bounded by
// the configured users and no user can fill it for the others.
type sessions struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	m       map[[32]byte]session
	perUser map[string]int
	now     func() time.Time
}

func newSessions(ttl time.Duration, maxPerUser int, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, max: maxPerUser, m: make(map[[32]byte]session), perUser: map[string]int{}, now: now}
}

// create returns a new token for user, or a *LimitError when user holds
// max live sessions.
func (s *sessions) create(user string) (token string, expires time.Time, err error) {
	raw := randomBytes(32)
	token = base64.RawURLEncoding.EncodeToString(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.perUser[user] >= s.max {
		oldest := time.Time{}
		for k, v := range s.m {
			if v.user != user {
				continue
			}
			if !now.Before(v.expires) {
				s.deleteLocked(k)
			} else if oldest.IsZero() || v.expires.Before(oldest) {
				oldest = v.expires
			}
		}
		if s.perUser[user] >= s.max {
			return "", time.Time{}, &LimitError{What: "login sessions", Hint: "log out in another browser, or wait until a session ends",
				Limit: s.max, Wait: oldest.Sub(now)}
		}
	}
	expires = now.Add(s.ttl)
	s.m[sha256.Sum256([]byte(token))] = session{user: user, expires: expires}
	s.perUser[user]++
	return token, expires, nil
}

func (s *sessions) deleteLocked(k [32]byte) {
	if v, ok := s.m[k]; ok {
		delete(s.m, k)
		if s.perUser[v.user]--; s.perUser[v.user] <= 0 {
			delete(s.perUser, v.user)
		}
	}
}

// lookup returns the live session of token.
func (s *sessions) lookup(token string) (session, error) {
	if token == "" {
		return session{}, ErrNoSession
	}
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[k]
	if !ok {
		return session{}, ErrNoSession
	}
	if !s.now().Before(v.expires) {
		s.deleteLocked(k)
		return session{}, ErrNoSession
	}
	return v, nil
}

// remove ends a session; unknown tokens are ignored.
func (s *sessions) remove(token string) {
	k := sha256.Sum256([]byte(token))
	s.mu.Lock()
	s.deleteLocked(k)
	s.mu.Unlock()
}

// limiter counts login attempts per key in fixed windows. The table is
// bounded and evicts the least recently used key when full: a flood of
// new keys (distinct user names, many addresses) costs the flooder its own
// oldest entries, never everyone else's logins.
type limiter struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	max    int
	m      map[string]*list.Element // of *bucket
	lru    *list.List               // front: most recently used
	now    func() time.Time
}

type bucket struct {
	key   string
	start time.Time
	n     int
}

func newLimiter(limit int, window time.Duration, maxKeys int, now func() time.Time) *limiter {
	return &limiter{limit: limit, window: window, max: max(maxKeys, 1), m: make(map[string]*list.Element), lru: list.New(), now: now}
}

// bucketLocked returns key's bucket in its current window, creating it
// (and evicting the least recently used key when the table is full).
func (l *limiter) bucketLocked(key string, now time.Time) *bucket {
	if e, ok := l.m[key]; ok {
		l.lru.MoveToFront(e)
		b := e.Value.(*bucket)
		if now.Sub(b.start) >= l.window {
			b.start, b.n = now, 0
		}
		return b
	}
	for len(l.m) >= l.max {
		old := l.lru.Back()
		l.lru.Remove(old)
		delete(l.m, old.Value.(*bucket).key)
	}
	b := &bucket{key: key, start: now}
	l.m[key] = l.lru.PushFront(b)
	return b
}

// allow counts one attempt for key and reports whether it is within the
// limit; when not, it returns how long until the window resets.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.bucketLocked(key, now)
	b.n++
	if b.n > l.limit {
		return false, b.start.Add(l.window).Sub(now)
	}
	return true, 0
}

// refund takes back one attempt counted by allow (a login that turned out
// right), so only failed attempts use up the key's budget.
func (l *limiter) refund(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.m[key]; ok {
		if b := e.Value.(*bucket); b.n > 0 {
			b.n--
		}
	}
}

// size is the number of keys in the table.
func (l *limiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
