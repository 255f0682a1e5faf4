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

// FileEntry is one directory entry as LXD describes it without opening
// it: a symlink is described itself, never its target.
type FileEntry struct {
	Name string `json:"name"`
	Type string `json:"type"` // file | directory | symlink
	// Mode is the permission bits in octal ("0644").
	Mode  string    `json:"mode"`
	UID   int       `json:"uid"`
	GID   int       `json:"gid"`
	MTime time.Time `json:"mtime,omitzero"`
}
