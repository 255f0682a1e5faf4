package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"remote/api"
)

func fileQuery(p string) url.Values { return url.Values{"path": {p}} }

// Files lists a directory under /workspace in the project's container
// (GET /v1/projects/{name}/files); "" lists /workspace.
func (c *Client) Files(ctx context.Context, project, dir string) (api.FileList, error) {
	var q url.Values
	if dir != "" {
		q = fileQuery(dir)
	}
	return fetch[api.FileList](ctx, c, http.MethodGet, projectPath(project, "/files"), q, nil)
}

// Download streams a file under /workspace of the project's container
// into w and returns the bytes written; a short answer (fewer bytes than
// the daemon announced) is an error.
func (c *Client) Download(ctx context.Context, project, p string, w io.Writer) (int64, error) {
	resp, err := c.do(ctx, http.MethodGet, projectPath(project, "/files/raw"), fileQuery(p), nil, "")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("download %s from project %q: %w", p, project, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("download %s from project %q: %d of %d bytes: %w", p, project, n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, nil
}

// Upload streams size bytes of r into the file p under /workspace of the
// project's container (created or replaced; PUT
// /v1/projects/{name}/files/raw). The daemon refuses a size over its
// [projects] max_upload_bytes with 413 before anything is written.
func (c *Client) Upload(ctx context.Context, project, p string, r io.Reader, size int64) error {
	u := "http://remoted" + projectPath(project, "/files/raw") + "?" + fileQuery(p).Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, io.NopCloser(r))
	if err != nil {
		return fmt.Errorf("upload %s to project %q: %w", p, project, err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if c.user != "" {
		req.Header.Set(api.HeaderUser, c.user)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("upload %s to project %q: connect to remoted at %s: %w", p, project, c.socket, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return decodeError(resp)
	}
	return nil
}
