package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestNotify(t *testing.T) {
	got, err := Parse("f.toml", []byte("[notify]\nwebhook_url = \"https://hooks.example/x?token=abc\"\n[notify.headers]\nAuthorization = \"Bearer t0k3n\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Notify{WebhookURL: "https://hooks.example/x?token=abc", Headers: map[string]string{"Authorization": "Bearer t0k3n"}}
	if !reflect.DeepEqual(got.Notify, want) {
		t.Fatalf("Notify = %+v, want %+v", got.Notify, want)
	}
	if d := Default().Notify; d.WebhookURL != "" || d.Headers != nil {
		t.Fatalf("default notify %+v, want none", d)
	}
	const secret = "s3cr3t-Value"
	for in, msg := range map[string]string{
		"[notify]\nwebhook_url = \"ftp://h/?k=" + secret + "\"\n":                                "f.toml:2: [notify] webhook_url: scheme must be http or https",
		"[notify]\nwebhook_url = \"https:///p?k=" + secret + "\"\n":                              "f.toml:2: [notify] webhook_url: has no host",
		"[notify]\nwebhook_url = \"http://h\"\n[notify.headers]\n\"A B\" = \"" + secret + "\"\n": `f.toml:4: [notify.headers] "A B": "A B" is not a header name`,
		"[notify]\nwebhook_url = \"http://h\"\n[notify.headers]\nX = \"a\\n" + secret + "\"\n":   "f.toml:4: [notify.headers] X: value has a line break or NUL",
		"[notify.headers]\nX = \"" + secret + "\"\n":                                             "f.toml:1: [notify] headers: set webhook_url too, or leave headers out",
	} {
		_, err := Parse("f.toml", []byte(in))
		if err == nil || !errors.Is(err, ErrInvalidValue) || err.Error() != msg {
			t.Errorf("Parse(%q) = %v, want %s", in, err, msg)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the secret: %v", err)
		}
	}
}
