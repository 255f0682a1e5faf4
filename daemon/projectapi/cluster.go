package projectapi

import "remote/internal/lazyre"

// targetRE is a project's cluster placement (api.Project.Target): an LXD
// cluster member name, or "@" and a cluster group name.
var targetRE = lazyre.New(`^@?[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
