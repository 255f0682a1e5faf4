package forge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxMessageBytes bounds the forge's own message in an *APIError.
const maxMessageBytes = 512

// maxURLBytes bounds the pull request's URL taken from an answer.
const maxURLBytes = 2048

// APIError is a forge's refusal: a non-2xx answer, with the forge's own
// message ("message" and "errors" on GitHub and Gitea, "message" on
// GitLab), bounded and with the token redacted. A 429 or 5xx is
// Unavailable (try again later); any other status a FailedPrecondition
// (the forge will not take it as it is: bad token, no such repository,
// the pull request exists already).
type APIError struct {
	Kind    Kind
	Host    string // the API's host
	Status  int
	Message string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("forge %s%s answered %d %s", e.Kind, hostSuffix(e.Host), e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Unavailable marks a refusal worth retrying (errdefs.IsUnavailable).
func (e *APIError) Unavailable() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// FailedPrecondition marks every other refusal (errdefs.IsFailedPrecondition).
func (e *APIError) FailedPrecondition() bool { return !e.Unavailable() }

// Error is a failure to get an answer from a forge, or an answer that is
// not the documented one: unreachable (Unavailable), a redirect to another
// host, an unreadable success answer (FailedPrecondition).
type Error struct {
	Kind        Kind
	Host        string
	Msg         string
	unavailable bool
}

func (e *Error) Error() string { return "forge " + string(e.Kind) + hostSuffix(e.Host) + ": " + e.Msg }

// Unavailable marks a transport failure (errdefs.IsUnavailable).
func (e *Error) Unavailable() bool { return e.unavailable }

// FailedPrecondition marks an answer that is not the documented one
// (errdefs.IsFailedPrecondition).
func (e *Error) FailedPrecondition() bool { return !e.unavailable }

func hostSuffix(h string) string {
	if h == "" {
		return ""
	}
	return " (" + h + ")"
}

// invalidError is bad input, named (errdefs.IsInvalidArgument).
type invalidError struct{ msg string }

func (e *invalidError) Error() string         { return e.msg }
func (e *invalidError) InvalidArgument() bool { return true }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// decodeAnswer reads a forge's answer in kind's dialect: a 2xx carries the
// pull request (GitHub/Gitea html_url and number, GitLab web_url and iid);
// anything else is an *APIError. No error or result contains token.
func decodeAnswer(kind Kind, status int, data []byte, token string) (Result, error) {
	if status < 200 || status > 299 {
		return Result{}, &APIError{Kind: kind, Status: status, Message: forgeMessage(data, token)}
	}
	var a struct {
		HTMLURL string `json:"html_url"`
		Number  int    `json:"number"`
		WebURL  string `json:"web_url"`
		IID     int    `json:"iid"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return Result{}, &Error{Kind: kind, Msg: fmt.Sprintf("the %d answer is not a JSON object", status)}
	}
	r := Result{URL: a.HTMLURL, Number: a.Number}
	urlField, numField := "html_url", "number"
	if kind == GitLab {
		r = Result{URL: a.WebURL, Number: a.IID}
		urlField, numField = "web_url", "iid"
	}
	// The URL is shown to the user as a link: only an absolute http(s)
	// one, and never one carrying the token.
	u, err := url.Parse(r.URL)
	switch {
	case r.URL == "" || len(r.URL) > maxURLBytes || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil:
		return Result{}, &Error{Kind: kind, Msg: fmt.Sprintf("the %d answer has no absolute http(s) %s", status, urlField)}
	case token != "" && strings.Contains(r.URL, token):
		return Result{}, &Error{Kind: kind, Msg: fmt.Sprintf("the %d answer's %s carries the token; refused", status, urlField)}
	case r.Number <= 0:
		return Result{}, &Error{Kind: kind, Msg: fmt.Sprintf("the %d answer has no positive %s", status, numField)}
	}
	return r, nil
}

// forgeMessage is the forge's own explanation in an error answer:
// "message", then "error", then "errors", flattened to one line, the token
// redacted, control characters dropped, at most maxMessageBytes. A body
// that is not a JSON object gives "".
func forgeMessage(data []byte, token string) string {
	var e struct {
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
		Errors  json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(data, &e) != nil {
		return ""
	}
	var parts []string
	for _, raw := range []json.RawMessage{e.Message, e.Error, e.Errors} {
		var b limited
		flatten(&b, raw, 0)
		if s := strings.TrimSpace(b.String()); s != "" && !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	msg := bound(clean(redact(strings.Join(parts, ": "), token)), maxMessageBytes)
	if token != "" && strings.Contains(msg, token) { // formed by cleaning or cutting: never shown
		return "(the message is withheld: it carried the token)"
	}
	return msg
}

// limited is a builder that stops growing past a bound, so a hostile
// answer's deep or wide JSON costs at most that much.
type limited struct{ strings.Builder }

const flattenLimit = 4 * maxMessageBytes

func (b *limited) add(s string) {
	if room := flattenLimit - b.Len(); room > 0 {
		if len(s) > room {
			s = s[:room]
		}
		b.WriteString(s)
	}
}

// flatten writes a JSON value as text: strings as they are, arrays joined
// with "; ", objects by their "message" when they have one (GitHub's
// error objects), else as "key: value" pairs in key order (GitLab's
// {"title": ["can't be blank"]}).
func flatten(b *limited, raw json.RawMessage, depth int) {
	if len(raw) == 0 || depth > 8 || b.Len() >= flattenLimit {
		return
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.add(s)
		return
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for i, el := range arr {
			if i > 0 {
				b.add("; ")
			}
			flatten(b, el, depth+1)
		}
		return
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		if m, ok := obj["message"]; ok {
			flatten(b, m, depth+1)
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b.add(", ")
			}
			b.add(k + ": ")
			flatten(b, obj[k], depth+1)
		}
		return
	}
	if string(raw) != "null" {
		b.add(string(raw)) // a number or a boolean
	}
}

// redact replaces every occurrence of token in s.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "[redacted]")
}

// clean replaces control characters (a terminal's escapes among them) and
// invalid UTF-8 with spaces.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
}

// bound cuts s to at most n bytes at a rune boundary, marking the cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
