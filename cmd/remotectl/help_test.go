package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestUsageOnce: remotectl -h (and --help, help) prints its usage once,
// on stdout, and exits 0; a bad global flag prints it once, on stderr,
// and exits 2. The flag package's own Usage hook used to print it a
// second time on stderr.
func TestUsageOnce(t *testing.T) {
	for _, tt := range []struct {
		args             []string
		code             int
		stdoutN, stderrN int
	}{
		{[]string{"-h"}, 0, 1, 0},
		{[]string{"--help"}, 0, 1, 0},
		{[]string{"help"}, 0, 1, 0},
		{[]string{"-nope"}, 2, 0, 1},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errb)
		const u = "usage: remotectl [-socket PATH]"
		if code != tt.code || strings.Count(out.String(), u) != tt.stdoutN || strings.Count(errb.String(), u) != tt.stderrN {
			t.Errorf("%v: exit %d (want %d), usage %d times on stdout (want %d), %d on stderr (want %d)\nstdout: %s\nstderr: %s",
				tt.args, code, tt.code, strings.Count(out.String(), u), tt.stdoutN, strings.Count(errb.String(), u), tt.stderrN, out.String(), errb.String())
		}
	}
}
