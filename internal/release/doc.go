// Package release holds no code: its tests build the Debian package of
// `make release` (scripts/release, packaging/deb) and check what an
// operator installs with it: the files and their modes, the conffile, the
// dependencies, the maintainer scripts, the version mapping of
// docs/releasing.md, and lintian's verdict where lintian is installed.
//
// It imports nothing; its tests import internal/testkit.
package release
