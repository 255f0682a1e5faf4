package lxdconn

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Profiles looks the LXD profiles new containers get ([lxd] profiles) up
// for the doctor (doctor.ProfileChecker).
type Profiles struct {
	Conn  *Conn
	Names []string
}

// Profiles returns the profiles new containers get.
func (p Profiles) Profiles() []string { return p.Names }

// CheckProfile returns nil when LXD has the profile name in the client's
// project (LXD answers from the default project when that project does not
// have profiles of its own); an error matching lxdexec.ErrNotFound when it
// does not, ErrUnavailable while LXD cannot be reached.
func (p Profiles) CheckProfile(ctx context.Context, name string) error {
	cl, err := p.Conn.get()
	if err != nil {
		return err
	}
	path := "/1.0/profiles/" + url.PathEscape(name)
	if project := cl.Project(); project != "" {
		path += "?project=" + url.QueryEscape(project)
	}
	if _, err := cl.Query(ctx, http.MethodGet, path, nil, ""); err != nil {
		return fmt.Errorf("profile %q: %w", name, err)
	}
	return nil
}
