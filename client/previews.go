package client

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"remote/api"
)

// SetProjectPorts replaces a project's ports (PATCH /v1/projects/{name});
// the daemon sets its container's preview devices to them. An empty list
// removes them all.
func (c *Client) SetProjectPorts(ctx context.Context, name string, ports []int) (api.Project, error) {
	if ports == nil {
		ports = []int{}
	}
	return fetch[api.Project](ctx, c, http.MethodPatch, projectPath(name), nil, api.PatchProjectRequest{Ports: &ports})
}

// Preview sends GET path to port of the project's container through the
// daemon (/v1/projects/{name}/ports/{port}/{path}); the caller closes the
// answer's body. A non-2xx answer is an *Error.
func (c *Client) Preview(ctx context.Context, name string, port int, path string) (*http.Response, error) {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return c.do(ctx, http.MethodGet, projectPath(name, "/ports/", strconv.Itoa(port), path), nil, nil, "")
}
