// Package testkit holds what the tests of several packages share: helpers to
// reach the real LXD and the real agent CLIs (failing instead of skipping when
// CI is set, skipping at once in a -short run: Short, NeedsRoot), the fake model servers that those CLIs talk to, and the
// module's own commands built once per test process, and Logger, which
// carries the logs of the code under test into t.Log at the level
// REMOTE_TEST_LOG_LEVEL names.
package testkit
