package web

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// FuzzSameOrigin feeds arbitrary Origin and Sec-Fetch-Site headers to the
// origin check: it must never panic; it admits only Sec-Fetch-Site
// same-origin or none, or, without fetch metadata, an Origin naming exactly
// the request's scheme and host.
func FuzzSameOrigin(f *testing.F) {
	for _, s := range [][2]string{
		{"http://127.0.0.1:8080", ""}, {"https://evil.example", ""}, {"null", ""},
		{"http://127.0.0.1:8080", "cross-site"}, {"", "same-origin"}, {"", "none"},
		{"http://127.0.0.1:8080.evil", ""}, {"http://user@127.0.0.1:8080", ""}, {"HTTP://127.0.0.1:8080", ""},
		{"http://[::1]:8080", ""}, {"%zz", ""}, {"http://127.0.0.1:8080/path?q", "same-site"},
	} {
		f.Add(s[0], s[1])
	}
	s := &Server{} // no trusted proxies: X-Forwarded-Proto is ignored
	f.Fuzz(func(t *testing.T, origin, site string) {
		r := httptest.NewRequest("POST", "http://127.0.0.1:8080/v1/chats", nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		r.Header.Set("X-Forwarded-Proto", "https")
		if !s.sameOrigin(r) {
			return
		}
		site = r.Header.Get("Sec-Fetch-Site")
		if site != "" && site != "same-origin" && site != "none" {
			t.Fatalf("admitted Sec-Fetch-Site %q", site)
		}
		if o := r.Header.Get("Origin"); o != "" && site == "" {
			u, err := url.Parse(o)
			if err != nil || !strings.EqualFold(u.Host, "127.0.0.1:8080") || u.Scheme != "http" {
				t.Fatalf("admitted Origin %q", o)
			}
		}
	})
}
