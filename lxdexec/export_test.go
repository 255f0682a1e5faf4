package lxdexec

// SetBeforeWait makes c run f between each operation's request and its
// wait, e.g. to wait until LXD has forgotten the operation.
func SetBeforeWait(c *Client, f func(opURL string)) { c.beforeWait = f }
