package config

import "testing"

// TestWebPublicURL: [web] public_url is an absolute http(s) URL without
// user, query or fragment, or empty.
func TestWebPublicURL(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "https://remote.example.net": true, "http://10.0.0.2:8080/": true,
		"ftp://x": false, "https://u:p@x": false, "/rel": false, "https://x/?q=1": false} {
		c := Default()
		c.Web.PublicURL = v
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("public_url %q: %v", v, err)
		}
	}
}
