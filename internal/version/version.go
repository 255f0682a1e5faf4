// Package version tells which build of Remote is running: the string
// `make build` stamps into the binaries from `git describe --always --dirty
// --tags`, or, for a binary built without the stamp (go build, go install),
// what the Go toolchain recorded in it (the module version, else the VCS
// revision). remoted, remotectl and remote-web print it for -version and
// remoted reports it in GET /v1/info.
//
// It imports only the standard library; any package of this module may
// import it.
package version

import "runtime/debug"

// stamped is set by the linker: make build passes
// -ldflags "-X remote/internal/version.stamped=$(git describe --always --dirty --tags)".
var stamped string

// Unknown is the version of a build that carries neither a stamp nor any
// version or VCS information (e.g. go build with -buildvcs=false).
const Unknown = "dev"

// String returns the running binary's version: the stamp, else the
// build information's, else Unknown.
func String() string {
	if stamped != "" {
		return stamped
	}
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(bi, ok)
}

// fromBuildInfo derives a version from what the toolchain recorded: the
// main module's version when it is a real one (go install remote/...@v1.2.3,
// or the pseudo-version Go 1.24+ derives from the VCS), else the VCS
// revision (12 hex digits, "-dirty" when the tree had local changes).
func fromBuildInfo(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return Unknown
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return Unknown
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
