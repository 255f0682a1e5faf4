package api

// Request headers of the daemon API.
const (
	// HeaderUser names the user a request acts for (the frontend's browser
	// user, or remotectl's local user). Chats are owned by this name.
	HeaderUser = "X-Remote-User"

	// HeaderFrontend marks a request relayed by the frontend (remote-web).
	// The daemon refuses any request that carries a browser Origin header
	// unless it also carries HeaderFrontend: a browser cannot add this
	// header to a cross-site request without a CORS preflight, which the
	// daemon never grants, so a browser that somehow reaches the socket
	// (e.g. through a naive TCP-to-Unix relay) is refused, while remote-web,
	// which checks the Origin against its own site first, passes. remote-web
	// sets it to FrontendRemoteWeb (or strips Origin after checking it).
	HeaderFrontend = "X-Remote-Frontend"

	// FrontendRemoteWeb is remote-web's value of HeaderFrontend.
	FrontendRemoteWeb = "remote-web"
)
