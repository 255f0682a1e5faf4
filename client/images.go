package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"remote/api"
)

// Images lists the local LXD image aliases a project may name (GET
// /v1/images).
func (c *Client) Images(ctx context.Context) ([]api.Image, error) {
	return fetch[[]api.Image](ctx, c, http.MethodGet, "/v1/images", nil, nil)
}

// ImportImage uploads an LXD image tarball of size bytes from r and names
// it alias (POST /v1/images?alias=); root (or the daemon's own user) only.
// It returns once LXD has stored the image.
func (c *Client) ImportImage(ctx context.Context, alias string, r io.Reader, size int64) (api.Image, error) {
	resp, err := c.send(ctx, http.MethodPost, "/v1/images", url.Values{"alias": {alias}}, r, size, "application/octet-stream", "")
	if err != nil {
		return api.Image{}, err
	}
	defer resp.Body.Close()
	var out api.Image
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&out); err != nil {
		return api.Image{}, fmt.Errorf("POST /v1/images: decode answer: %w", err)
	}
	return out, nil
}
