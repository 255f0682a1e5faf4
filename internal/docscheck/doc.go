// Package docscheck holds the tests that keep the shipped documentation
// true: every relative link in README.md, CONTRIBUTING.md and docs/*.md
// reaches an existing file (and heading), the README stays a
// ten-minute read, and docs/config.md shows exactly the default
// configuration remoted -print-default-config prints. It has no code
// that ships and imports nothing of this module outside its tests.
package docscheck
