package client

import (
	"context"
	"net/http"
	"net/url"

	"remote/api"
)

// CLIStore lists the daemon's CLI store (GET /v1/cli-store).
func (c *Client) CLIStore(ctx context.Context) ([]api.CLIStoreEntry, error) {
	return fetch[[]api.CLIStoreEntry](ctx, c, http.MethodGet, "/v1/cli-store", nil, nil)
}

// InstallCLI installs a provider's CLI into the daemon's store from the
// npm registry and selects it (POST /v1/providers/{id}/install; root
// only). It may take minutes.
func (c *Client) InstallCLI(ctx context.Context, provider string, req api.InstallCLIRequest) ([]api.CLIStoreEntry, error) {
	return fetch[[]api.CLIStoreEntry](ctx, c, http.MethodPost, "/v1/providers/"+url.PathEscape(provider)+"/install", nil, req)
}

// SelectCLI makes an installed version the one new project runs get
// (POST /v1/providers/{id}/select; root only).
func (c *Client) SelectCLI(ctx context.Context, provider, version string) ([]api.CLIStoreEntry, error) {
	return fetch[[]api.CLIStoreEntry](ctx, c, http.MethodPost, "/v1/providers/"+url.PathEscape(provider)+"/select", nil, api.SelectCLIRequest{Version: version})
}
