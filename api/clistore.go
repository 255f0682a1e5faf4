package api

// CLIStoreEntry is one provider's CLIs in the daemon's CLI store (GET
// /v1/cli-store): the installed versions, the selected one (what new
// project runs get) and the tested one.
type CLIStoreEntry struct {
	Provider string   `json:"provider"`
	Versions []string `json:"versions"`
	Selected string   `json:"selected,omitempty"`
	Tested   string   `json:"tested"`
}

// InstallCLIRequest is the body of POST /v1/providers/{id}/install:
// Version defaults to the tested version; another one needs Untested.
// The installed version becomes the selected one.
type InstallCLIRequest struct {
	Version  string `json:"version,omitempty"`
	Untested bool   `json:"untested,omitempty"`
}

// SelectCLIRequest is the body of POST /v1/providers/{id}/select.
type SelectCLIRequest struct {
	Version string `json:"version"`
}
