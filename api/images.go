package api

// Image is one local LXD image alias a project may name in `image` (GET
// /v1/images, POST /v1/images): the alias, the image's fingerprint and
// size in bytes, its description, and whether it is the daemon's default
// image ([lxd] image).
type Image struct {
	Alias       string `json:"alias"`
	Fingerprint string `json:"fingerprint"`
	Size        int64  `json:"size"`
	Description string `json:"description,omitempty"`
	Default     bool   `json:"default,omitempty"`
}
