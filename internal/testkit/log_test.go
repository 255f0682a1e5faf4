package testkit

import (
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		env  string
		want hclog.Level
	}{
		{"", hclog.Warn},
		{"debug", hclog.Debug},
		{" TRACE ", hclog.Trace},
		{"off", hclog.Off},
	} {
		t.Setenv(LogLevelEnv, tt.env)
		if got := LogLevel(t); got != tt.want {
			t.Errorf("%s=%q: level %v, want %v", LogLevelEnv, tt.env, got, tt.want)
		}
	}
}

// TestLoggerOutlivesTest: a goroutine that logs after its test has ended
// (a daemon still stopping) must not panic in t.Log.
func TestLoggerOutlivesTest(t *testing.T) {
	var log hclog.Logger
	t.Run("inner", func(t *testing.T) {
		t.Setenv(LogLevelEnv, "info")
		log = Logger(t, "inner")
		log.Info("during the test")
	})
	log.Error("after the test: dropped")
}
