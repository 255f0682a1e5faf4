// Package testkit holds what the tests of several packages share: helpers to
// reach the real LXD and the real agent CLIs (failing instead of skipping when
// CI is set), and the fake model servers that those CLIs talk to.
package testkit
