package testkit

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// DevImage is the alias of the development image `make image`
// (scripts/image) imports: the default [lxd] image.
const DevImage = "remote-dev"

// DevImageTarball returns the image tarball `make image` cached
// (build/image/remote-dev.tar.gz, in this checkout or under
// $REMOTE_CLI_ROOT) after checking LXD has the alias DevImage. Either
// missing: skipped locally, failed in CI (scripts/test builds it first).
func DevImageTarball(t testing.TB) string {
	t.Helper()
	cl := LXD(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cl.ImageAlias(ctx, DevImage); err != nil {
		Missing(t, "LXD has no image %s (run make image): %v", DevImage, err)
	}
	for _, root := range []string{Root(), os.Getenv(CLIRootEnv)} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "build", "image", DevImage+".tar.gz")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	Missing(t, "no %s.tar.gz under build/image (run make image)", DevImage)
	return ""
}
