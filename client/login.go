package client

import (
	"context"
	"net/http"
	"net/url"

	"remote/api"
)

func loginPath(provider string, rest ...string) string {
	p := "/v1/providers/" + url.PathEscape(provider) + "/login"
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// StartLogin starts (or returns the running) login of a host CLI (POST
// /v1/providers/{id}/login); method "" is the provider's default.
func (c *Client) StartLogin(ctx context.Context, provider, method string) (api.ProviderLogin, error) {
	return fetch[api.ProviderLogin](ctx, c, http.MethodPost, loginPath(provider), nil, api.StartLoginRequest{Method: method})
}

// Login returns a login's state.
func (c *Client) Login(ctx context.Context, provider, id string) (api.ProviderLogin, error) {
	return fetch[api.ProviderLogin](ctx, c, http.MethodGet, loginPath(provider, id), nil, nil)
}

// SubmitLoginCode hands the code the sign-in page showed to the CLI.
func (c *Client) SubmitLoginCode(ctx context.Context, provider, id, code string) (api.ProviderLogin, error) {
	return fetch[api.ProviderLogin](ctx, c, http.MethodPost, loginPath(provider, id, "code"), nil, api.LoginCodeRequest{Code: code})
}

// CancelLogin stops a running login.
func (c *Client) CancelLogin(ctx context.Context, provider, id string) (api.ProviderLogin, error) {
	return fetch[api.ProviderLogin](ctx, c, http.MethodDelete, loginPath(provider, id), nil, nil)
}

// Logout runs a host CLI's own logout (POST /v1/providers/{id}/logout).
func (c *Client) Logout(ctx context.Context, provider string) (api.LogoutResponse, error) {
	return fetch[api.LogoutResponse](ctx, c, http.MethodPost, "/v1/providers/"+url.PathEscape(provider)+"/logout", nil, nil)
}
