package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

func init() {
	register(command{Name: "image", Usage: "list [--json] | import FILE -alias NAME [--json]", Summary: "list the LXD images projects may name; import an image tarball (root only)", Run: runImage})
}

// imageCommands are the subcommands of `remotectl image`.
var imageCommands = map[string]command{
	"list":   {Name: "list", Usage: "[--json]", Summary: "list the local LXD image aliases a project may name (* marks the default)", Run: runImageList},
	"import": {Name: "import", Usage: "FILE -alias NAME [--json]", Summary: "import an LXD image tarball (metadata.yaml and rootfs, as make image writes) under NAME", Run: runImageImport},
}

func runImage(ctx context.Context, e *env, args []string) error {
	return dispatch(ctx, e, "image", imageCommands, args)
}

func runImageList(ctx context.Context, e *env, args []string) error {
	if _, err := parseExact(e.newFlags("image list"), args); err != nil {
		return err
	}
	imgs, err := e.Client.Images(ctx)
	if err != nil {
		return err
	}
	return printList(e, imgs, "ALIAS\tFINGERPRINT\tSIZE\tDESCRIPTION", func(tw io.Writer) {
		for _, im := range imgs {
			alias := im.Alias
			if im.Default {
				alias += " *"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", alias, short(im.Fingerprint), megabytes(im.Size), im.Description)
		}
	})
}

func runImageImport(ctx context.Context, e *env, args []string) error {
	fs := e.newFlags("image import")
	var alias string
	fs.StringVar(&alias, "alias", "", "the image's alias `NAME` (what a project's image names)")
	args, err := parseExact(fs, args, "FILE")
	if err != nil {
		return err
	}
	if alias == "" {
		return usagef("say which alias: -alias NAME")
	}
	f, err := os.Open(args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", args[0])
	}
	// Progress on stderr: the bytes sent, every second and at the end,
	// then LXD's unpacking (the daemon answers once LXD stored it).
	r := &countingReader{r: f}
	done := make(chan struct{})
	stopped := make(chan struct{})
	fmt.Fprintf(e.Stderr, "importing %s (%s) as %s\n", args[0], megabytes(fi.Size()), alias)
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		reported := false
		for {
			select {
			case <-done:
				return
			case <-t.C:
				n := r.n.Load()
				if n < fi.Size() {
					fmt.Fprintf(e.Stderr, "  sent %s of %s (%d%%)\n", megabytes(n), megabytes(fi.Size()), percent(n, fi.Size()))
				} else if !reported {
					fmt.Fprintf(e.Stderr, "  sent %s; LXD is unpacking and storing it...\n", megabytes(n))
					reported = true
				}
			}
		}
	}()
	start := time.Now()
	im, err := e.Client.ImportImage(ctx, alias, r, fi.Size())
	close(done)
	<-stopped
	if err != nil {
		return err
	}
	if e.JSON {
		return writeJSON(e.Stdout, im)
	}
	fmt.Fprintf(e.Stdout, "imported %s: fingerprint %s, %s, in %s\n", im.Alias, short(im.Fingerprint), megabytes(im.Size), time.Since(start).Round(time.Second))
	return nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

func percent(n, of int64) int64 {
	if of <= 0 {
		return 100
	}
	return n * 100 / of
}

// short is a fingerprint's first 12 characters, as LXD shows it.
func short(fp string) string { return fp[:min(len(fp), 12)] }
