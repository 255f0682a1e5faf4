package api

import "time"

// FileList is the answer of GET /v1/projects/{name}/files: the entries of
// one directory under /workspace in the project's container, sorted by
// name.
type FileList struct {
	// Path is the directory listed, absolute and clean ("/workspace/src").
	Path    string      `json:"path"`
	Entries []FileEntry `json:"entries"`
	// Truncated: the directory holds more entries than one answer lists
	// (the first ones by name are listed).
	Truncated bool `json:"truncated,omitempty"`
}

// FileEntry is one directory entry as lstat describes it, without
// opening it: a symlink is described itself, never its target.
type FileEntry struct {
	Name string `json:"name"`
	// Type is file | directory | symlink | fifo | socket | device.
	Type string `json:"type"`
	// Mode is the permission bits in octal ("0644").
	Mode  string    `json:"mode"`
	UID   int       `json:"uid"`
	GID   int       `json:"gid"`
	MTime time.Time `json:"mtime,omitzero"`
	// Size is a file's length in bytes (files only).
	Size *int64 `json:"size,omitempty"`
}

// DownloadDestAllowed reports whether a request with this Sec-Fetch-Dest
// may fetch GET /v1/projects/{name}/files/raw: a navigation or download
// ("document"), a fetch ("empty") or no fetch metadata (curl, remotectl);
// never a page's sub-resource (image, script, style, frame, media, font,
// worker, ...), so Markdown in a chat cannot make downloads run.
func DownloadDestAllowed(dest string) bool {
	switch dest {
	case "", "document", "empty":
		return true
	}
	return false
}
