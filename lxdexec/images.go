package lxdexec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Image is LXD's image object (GET /1.0/images/{fingerprint}); Size is the
// image file's size in bytes.
type Image struct {
	Fingerprint  string            `json:"fingerprint"`
	Size         int64             `json:"size"`
	Architecture string            `json:"architecture"`
	Type         string            `json:"type"`
	Properties   map[string]string `json:"properties"`
	Aliases      []ImageAliasRef   `json:"aliases"`
	UploadedAt   time.Time         `json:"uploaded_at"`
}

// ImageAliasRef is one alias as an image lists it.
type ImageAliasRef struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// ImageAlias is LXD's alias object (GET /1.0/images/aliases/{name});
// Target is the image's fingerprint.
type ImageAlias struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Target      string `json:"target"`
	Type        string `json:"type"`
}

// Images returns the local images (of the client's LXD project).
func (c *Client) Images(ctx context.Context) ([]Image, error) {
	var out []Image
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0/images"+c.query(url.Values{"recursion": {"1"}}), nil, &out); err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	return out, nil
}

// ImageAlias returns the local alias name; a missing one gives an error
// matching ErrNotFound.
func (c *Client) ImageAlias(ctx context.Context, name string) (*ImageAlias, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return nil, fmt.Errorf("image alias %q: invalid name: %w", name, ErrBadRequest)
	}
	var a ImageAlias
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0/images/aliases/"+url.PathEscape(name)+c.query(nil), nil, &a); err != nil {
		return nil, fmt.Errorf("image alias %q: %w", name, err)
	}
	return &a, nil
}

// ImportImage uploads an LXD image tarball (a unified tarball: metadata.yaml
// and rootfs/ in one, as `lxc image import` takes) read from r and waits
// until LXD has stored it; it returns the image's fingerprint (the
// tarball's SHA-256). filename is only recorded by LXD. An image LXD holds
// already (the same bytes) is no error: its fingerprint is returned. r is
// streamed (never held in memory); an error reading it aborts the upload,
// and LXD keeps nothing of it.
func (c *Client) ImportImage(ctx context.Context, r io.Reader, filename string) (string, error) {
	h := sha256.New()
	hdr := http.Header{"X-Lxd-Public": {"0"}}
	if filename != "" {
		hdr.Set("X-Lxd-Filename", filename)
	}
	// io.NopCloser: never replayed to another cluster member (see send).
	resp, err := c.do(ctx, http.MethodPost, "/1.0/images"+c.query(nil), io.NopCloser(io.TeeReader(r, h)), "", "application/octet-stream", hdr)
	if err != nil {
		return "", fmt.Errorf("import image: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if resp.Type != "async" {
		return "", fmt.Errorf("import image: want an operation, got %q: %w", resp.Type, ErrProtocol)
	}
	op, err := decodeOperation(resp.Metadata)
	if err != nil {
		return "", fmt.Errorf("import image: %w", err)
	}
	path := stripQuery(resp.Operation)
	if path == "" {
		path = "/1.0/operations/" + op.ID
	}
	done, err := c.WaitOperation(ctx, path)
	switch {
	case errors.Is(err, ErrConflict) || HasMessage(err, MsgImageExists):
		return sum, nil
	case errors.Is(err, ErrOperationForgotten):
		// Decide from the image the upload was to make.
		if _, gerr := c.image(ctx, sum); gerr == nil {
			return sum, nil
		}
		return "", fmt.Errorf("import image: %w", err)
	case err != nil:
		return "", fmt.Errorf("import image: %w", err)
	}
	var meta struct {
		Fingerprint string `json:"fingerprint"`
	}
	if done != nil && len(done.Metadata) > 0 {
		_ = json.Unmarshal(done.Metadata, &meta)
	}
	if meta.Fingerprint != "" {
		return meta.Fingerprint, nil
	}
	return sum, nil
}

// image reads one image by fingerprint.
func (c *Client) image(ctx context.Context, fingerprint string) (*Image, error) {
	var img Image
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0/images/"+url.PathEscape(fingerprint)+c.query(nil), nil, &img); err != nil {
		return nil, fmt.Errorf("image %s: %w", fingerprint, err)
	}
	return &img, nil
}

// SetImageAlias points the local alias name at the image fingerprint,
// creating the alias or moving an existing one (the image it named before
// stays in LXD, without that alias).
func (c *Client) SetImageAlias(ctx context.Context, name, fingerprint, description string) error {
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("image alias %q: invalid name: %w", name, ErrBadRequest)
	}
	err := c.syncJSON(ctx, http.MethodPost, "/1.0/images/aliases"+c.query(nil),
		map[string]string{"name": name, "target": fingerprint, "description": description}, nil)
	if errors.Is(err, ErrConflict) {
		err = c.syncJSON(ctx, http.MethodPut, "/1.0/images/aliases/"+url.PathEscape(name)+c.query(nil),
			map[string]string{"target": fingerprint, "description": description}, nil)
	}
	if err != nil {
		return fmt.Errorf("image alias %q: %w", name, err)
	}
	return nil
}
