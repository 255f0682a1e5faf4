// Package doctor owns GET /v1/doctor (remotectl doctor): host checks of
// LXD (its default image and [lxd] profiles), the socket, the host user
// and allowed roots, free space, provider readiness (a problem only for a
// provider a chat or project uses), the [forges] tables and the secrets
// key. It joins the route table as a
// daemon.RouteProvider; package daemon must never import it.
package doctor

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"remote/api"
	"remote/daemon"
	"remote/daemon/prompt"
	"remote/internal/errdefs"
	"remote/providers"
	"remote/providers/clistore"
	"remote/providers/runner"
	"remote/provisioning/warm"
)

// DefaultMinFreeBytes is the free space of the state directory below which
// the doctor reports a problem.
const DefaultMinFreeBytes = 1 << 30

// Doctor checks the host for GET /v1/doctor (remotectl doctor): LXD, the
// socket's mode and group, the host user and allowed roots, the state
// directory's free space, every provider's readiness and the secrets key.
// It is a RouteProvider; remoted wires it with its config.
type Doctor struct {
	LXD            daemon.LXDStatus // nil: LXD not configured (a problem)
	Registry       *prompt.Registry
	SocketPath     string
	SocketGroup    string // "" : no group required
	StateDir       string
	HostUser       runner.HostUser
	Roots          prompt.Roots
	SecretsKeyPath string
	MinFreeBytes   uint64 // DefaultMinFreeBytes when zero
	// CLIStore is the CLI store of project containers (nil: not checked).
	CLIStore *clistore.Store
	// Images looks the default image up in LXD (nil: not checked).
	Images ImageChecker
	// Warm is the warm container pool (nil: [projects] warm = 0).
	Warm *warm.Pool
	// Profiles looks the [lxd] profiles new containers get up in LXD
	// (nil: not checked).
	Profiles ProfileChecker
	// Uses reads the chats and projects that exist, for which providers
	// are in use and which forges project repositories need (nil: every
	// provider counts as used, no repository is known).
	Uses Uses
	// Forges are the [forges."<host>"] tables, one line each.
	Forges []Forge
}

// ProfileChecker looks LXD profiles up; *provisioning.Preparer implements
// it. CheckProfile's error is of class NotFound when LXD has no such
// profile, Unavailable when LXD cannot be asked.
type ProfileChecker interface {
	Profiles() []string
	CheckProfile(ctx context.Context, name string) error
}

// Uses is what the doctor reads of the store; *store.Store implements it.
// SecretKeys lists the names of a project's secrets, never their values.
type Uses interface {
	Chats() ([]api.Chat, error)
	Projects() ([]api.Project, error)
	SecretKeys(project string) ([]api.SecretInfo, error)
}

// Forge is one [forges."<host>"] table: the host of clone URLs, the API's
// kind and base URL.
type Forge struct {
	Host, Kind, API string
}

// ImageChecker looks images up in LXD; *provisioning.Preparer implements
// it. CheckImage's error is of class NotFound when LXD has no such alias,
// Unavailable when LXD cannot be asked.
type ImageChecker interface {
	DefaultImage() string
	CheckImage(ctx context.Context, name string) error
}

// Routes serves GET /v1/doctor to any allowed peer.
func (d *Doctor) Routes() []daemon.Route {
	return []daemon.Route{{Method: http.MethodGet, Pattern: "/v1/doctor", Access: daemon.AccessPeer, Handler: func(w http.ResponseWriter, r *http.Request) error {
		return daemon.WriteJSON(w, http.StatusOK, d.Check(r.Context()))
	}}}
}

// Check runs every check.
func (d *Doctor) Check(ctx context.Context) api.DoctorReport {
	var checks []api.DoctorCheck
	add := func(name, level, format string, args ...any) {
		checks = append(checks, api.DoctorCheck{Name: name, Level: level, Detail: fmt.Sprintf(format, args...)})
	}
	chats, projects, usesErr := d.uses()
	if usesErr != nil {
		add("store", api.DoctorWarn, "cannot read the chats and projects (%v): every provider that is not ready counts as used", usesErr)
	}
	// LXD.
	if d.LXD == nil {
		add("lxd", api.DoctorProblem, "LXD is not configured: project chats are unavailable")
	} else if st := d.LXD.Status(ctx); !st.Reachable {
		add("lxd", api.DoctorProblem, "LXD unreachable: %s (check the [lxd] socket and that LXD runs)", st.Error)
	} else {
		add("lxd", api.DoctorOK, "reachable, server version %s%s", st.ServerVersion, lxdWhere(st))
		if st.Pin != "" {
			add("lxd-pin", api.DoctorOK, "%s", st.Pin)
		} else if st.URL != "" {
			add("lxd-pin", api.DoctorWarn, "[lxd] server_cert is not set: the server is trusted through the system roots; pin /var/lib/lxd/cluster.crt (a cluster) or server.crt (a standalone server)")
		}
	}
	// The default image (only when LXD answers: else the line above says
	// why nothing works).
	if d.Images != nil {
		name := d.Images.DefaultImage()
		switch err := d.Images.CheckImage(ctx, name); {
		case err == nil:
			add("image", api.DoctorOK, "default image %s ([lxd] image) is in LXD", name)
		case errdefs.IsNotFound(err):
			add("image", api.DoctorProblem, "default image missing: %v; new projects are refused until it is there (or set [lxd] image to an alias remotectl image list shows)", err)
		case !errdefs.IsUnavailable(err):
			add("image", api.DoctorWarn, "default image %s: %v", name, err)
		}
	}
	// The profiles new containers get (only when LXD answers, as for the
	// image).
	if d.Profiles != nil {
		for _, name := range d.Profiles.Profiles() {
			switch err := d.Profiles.CheckProfile(ctx, name); {
			case err == nil:
				add("profile "+name, api.DoctorOK, "in LXD ([lxd] profiles)")
			case errdefs.IsNotFound(err):
				add("profile "+name, api.DoctorProblem, "[lxd] profiles names %q, which LXD does not have: new containers cannot be made (create it, or remove it from [lxd] profiles)", name)
			case !errdefs.IsUnavailable(err):
				add("profile "+name, api.DoctorWarn, "%v", err)
			}
		}
	}
	checks = append(checks, forgeChecks(d.Forges, projects, d.Uses)...)
	// Socket.
	if d.SocketPath != "" {
		var stt syscall.Stat_t
		if err := syscall.Stat(d.SocketPath, &stt); err != nil {
			add("socket", api.DoctorProblem, "%s: %v", d.SocketPath, err)
		} else {
			mode := os.FileMode(stt.Mode & 0o777)
			group := strconv.Itoa(int(stt.Gid))
			if g, err := user.LookupGroupId(group); err == nil {
				group = g.Name
			}
			switch {
			case mode&0o007 != 0:
				add("socket", api.DoctorProblem, "%s has mode %04o: others may connect; it must be 0660", d.SocketPath, mode)
			case d.SocketGroup != "" && group != d.SocketGroup && strconv.Itoa(int(stt.Gid)) != d.SocketGroup:
				add("socket", api.DoctorProblem, "%s has group %s, [daemon] socket_group is %s", d.SocketPath, group, d.SocketGroup)
			default:
				add("socket", api.DoctorOK, "%s mode %04o group %s", d.SocketPath, mode, group)
			}
		}
	}
	// Host user and roots.
	hu := d.HostUser
	switch fi, err := os.Stat(hu.Home); {
	case hu.Name == "":
		add("host_user", api.DoctorProblem, "no host user resolved")
	case err != nil || !fi.IsDir():
		add("host_user", api.DoctorProblem, "%s (uid %d): home %s is not a directory", hu.Name, hu.UID, hu.Home)
	case hu.UID == 0:
		add("host_user", api.DoctorWarn, "root: a loose chat's agent can do anything root can (set [agent] host_user)")
	default:
		add("host_user", api.DoctorOK, "%s (uid %d, home %s)", hu.Name, hu.UID, hu.Home)
	}
	var present []string
	for _, dir := range d.Roots.Dirs() {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			add("allowed_roots", api.DoctorWarn, "%s does not exist", dir)
			continue
		}
		present = append(present, dir)
	}
	if len(present) == 0 {
		add("allowed_roots", api.DoctorProblem, "no allowed root exists: loose chats cannot run (set [agent] allowed_roots)")
	} else {
		add("allowed_roots", api.DoctorOK, "%v", present)
	}
	// State directory free space.
	min := d.MinFreeBytes
	if min == 0 {
		min = DefaultMinFreeBytes
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(d.StateDir, &fs); err != nil {
		add("state_dir", api.DoctorProblem, "%s: %v", d.StateDir, err)
	} else if free := fs.Bavail * uint64(fs.Bsize); free < min {
		add("state_dir", api.DoctorProblem, "%s has %s free, below %s: free space or move [daemon] state_dir", d.StateDir, human(free), human(min))
	} else {
		add("state_dir", api.DoctorOK, "%s, %s free", d.StateDir, human(free))
	}
	// Providers. One that is enabled but not ready is a problem only when
	// something needs it (a chat of it, a project naming it as its
	// default); else a warning: every provider is enabled by default, and
	// an operator who uses one CLI has no reason to install the others.
	if d.Registry != nil {
		enabled, ready, unknown := 0, 0, []string{}
		for _, e := range d.Registry.List() {
			name := "provider " + string(e.ID)
			if e.Provider == nil {
				add(name, api.DoctorOK, "disabled in config")
				continue
			}
			enabled++
			r := prompt.ReadinessOf(ctx, e.Provider)
			switch {
			case r == nil:
				unknown = append(unknown, string(e.ID))
				add(name, api.DoctorOK, "enabled (readiness not reported by this adapter)")
			case !r.Ready:
				if use := providerUse(string(e.ID), chats, projects, usesErr); use != "" {
					add(name, api.DoctorProblem, "%s (needed: %s)", r.Action, use)
				} else {
					add(name, api.DoctorWarn, "%s (no chat or project uses it; [providers.%s] enabled = false leaves it out)", r.Action, e.ID)
				}
			case r.Action != "":
				ready++
				add(name, api.DoctorWarn, "%s %s, %s; %s", r.Binary, r.Version, r.Auth, r.Action)
			default:
				ready++
				add(name, api.DoctorOK, "%s %s (tested), logged in: %s", r.Binary, r.Version, r.Auth)
			}
		}
		switch {
		case enabled == 0 || ready > 0:
		case len(unknown) == 0:
			add("providers", api.DoctorProblem, "no enabled provider is ready: no chat can run (install and log in one of them, see the provider lines)")
		default:
			add("providers", api.DoctorWarn, "no enabled provider reports ready (%s cannot say): install and log in one of them, see the provider lines", strings.Join(unknown, ", "))
		}
	}
	checks = append(checks, cliStoreChecks(d.CLIStore)...)
	// The warm container pool.
	if st := d.Warm.Stats(); st.Size > 0 {
		level, last := api.DoctorOK, ""
		if st.RefillIn > 0 {
			last = fmt.Sprintf("; the next create starts in %s (%s after the latest claim)", (st.RefillIn + time.Second - 1).Truncate(time.Second), st.RefillDelay)
		}
		if st.LastError != "" {
			level, last = api.DoctorWarn, last+"; the last create failed: "+st.LastError
		}
		add("warm", level, "%d of %d warm containers ready, %d being created; %d projects claimed one, %d found none ready%s",
			st.Ready, st.Size, st.Creating, st.Claims, st.Misses, last)
	}
	// Secrets key.
	if d.SecretsKeyPath != "" {
		switch fi, err := os.Stat(d.SecretsKeyPath); {
		case err != nil:
			add("secrets_key", api.DoctorProblem, "%s: %v", d.SecretsKeyPath, err)
		case !fi.Mode().IsRegular() || fi.Size() != 32:
			add("secrets_key", api.DoctorProblem, "%s is not a 32-byte key file", d.SecretsKeyPath)
		case fi.Mode().Perm()&0o077 != 0:
			add("secrets_key", api.DoctorProblem, "%s has mode %04o: it must be 0600 (or 0400)", d.SecretsKeyPath, fi.Mode().Perm())
		default:
			add("secrets_key", api.DoctorOK, "%s (mode %04o)", d.SecretsKeyPath, fi.Mode().Perm())
		}
	}
	rep := api.DoctorReport{OK: true, Checks: checks}
	for _, c := range checks {
		if c.Level == api.DoctorProblem {
			rep.OK = false
		}
	}
	return rep
}

func human(b uint64) string {
	const gib = 1 << 30
	if b >= gib {
		return fmt.Sprintf("%.1f GiB", float64(b)/gib)
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

// cliStoreChecks are the doctor's lines about the CLI store: per provider
// the selected version (warn when untested), or that the store has none
// (not a problem: containers then install the CLI themselves).
func cliStoreChecks(st *clistore.Store) []api.DoctorCheck {
	if st == nil {
		return nil
	}
	var out []api.DoctorCheck
	for _, p := range []providers.ProviderID{providers.Claude, providers.Codex} {
		name := "store " + string(p)
		spec, _ := clistore.SpecOf(p)
		vs, sel, err := st.Installed(p)
		switch {
		case err != nil:
			out = append(out, api.DoctorCheck{Name: name, Level: api.DoctorProblem, Detail: fmt.Sprintf("%s: %v", st.Dir(), err)})
		case sel == "":
			out = append(out, api.DoctorCheck{Name: name, Level: api.DoctorOK, Detail: fmt.Sprintf(
				"no version selected (%d installed): project containers install %s themselves; remotectl providers install %s mounts it instead", len(vs), p, p)})
		case sel != spec.Tested:
			out = append(out, api.DoctorCheck{Name: name, Level: api.DoctorWarn, Detail: fmt.Sprintf(
				"%s selected, untested (tested: %s): remotectl providers install %s", sel, spec.Tested, p)})
		default:
			out = append(out, api.DoctorCheck{Name: name, Level: api.DoctorOK, Detail: fmt.Sprintf("%s selected (tested), mounted read-only into project containers", sel)})
		}
	}
	return out
}

// lxdWhere names the cluster member and URL in use for the doctor.
func lxdWhere(st api.LXDInfo) string {
	switch {
	case st.Member != "" && st.URL != "":
		return fmt.Sprintf(", cluster member %s at %s", st.Member, st.URL)
	case st.URL != "":
		return " at " + st.URL
	}
	return ""
}

// uses reads the chats and projects (none without Uses).
func (d *Doctor) uses() ([]api.Chat, []api.Project, error) {
	if d.Uses == nil {
		return nil, nil, nil
	}
	chats, err := d.Uses.Chats()
	if err != nil {
		return nil, nil, err
	}
	projects, err := d.Uses.Projects()
	if err != nil {
		return nil, nil, err
	}
	return chats, projects, nil
}

// providerUse says what needs provider id: how many chats are of it and
// how many projects name it as their default; "" when nothing does. When
// the store could not be read everything counts as needing it. Counts,
// never names: any allowed peer reads the doctor.
func providerUse(id string, chats []api.Chat, projects []api.Project, err error) string {
	if err != nil {
		return "the store could not be read"
	}
	nc, np := 0, 0
	for _, c := range chats {
		if c.Provider == id {
			nc++
		}
	}
	for _, p := range projects {
		if p.Provider == id {
			np++
		}
	}
	var parts []string
	if nc > 0 {
		parts = append(parts, plural(nc, "chat", "chats")+" of it")
	}
	if np > 0 {
		parts = append(parts, plural(np, "project", "projects")+" with it as default provider")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// forgeChecks are one line per [forges."<host>"] table (its kind and API,
// and for the projects whose repository is on that host whether each names
// a token secret that is set: counts and the secret's name only, never a
// value, never another user's project name), and a warning per repository
// host without a table (its pull requests are refused).
func forgeChecks(forges []Forge, projects []api.Project, uses Uses) []api.DoctorCheck {
	type tally struct{ repos, noSecret, unset int }
	byHost := map[string]*tally{}
	for _, p := range projects {
		if p.Repo == nil {
			continue
		}
		u, err := url.Parse(p.Repo.URL)
		if err != nil || u.Host == "" {
			continue
		}
		host := strings.ToLower(u.Host)
		t := byHost[host]
		if t == nil {
			t = &tally{}
			byHost[host] = t
		}
		t.repos++
		switch {
		case p.Repo.TokenSecret == "":
			t.noSecret++
		case !secretSet(uses, p.Name, p.Repo.TokenSecret):
			t.unset++
		}
	}
	var out []api.DoctorCheck
	known := map[string]bool{}
	for _, f := range forges {
		known[f.Host] = true
		level, detail := api.DoctorOK, fmt.Sprintf("%s at %s", f.Kind, f.API)
		if t := byHost[f.Host]; t == nil {
			detail += "; no project's repository is on this host"
		} else {
			detail += fmt.Sprintf("; %s with a repository here", plural(t.repos, "project", "projects"))
			if set := t.repos - t.noSecret - t.unset; set > 0 {
				detail += fmt.Sprintf(", %d with its token secret set", set)
			}
			if t.unset > 0 {
				level = api.DoctorWarn
				detail += fmt.Sprintf(", %d naming a token secret that is not set (remotectl project secret set NAME KEY)", t.unset)
			}
			if t.noSecret > 0 {
				level = api.DoctorWarn
				detail += fmt.Sprintf(", %d without repo.tokenSecret", t.noSecret)
			}
			if level == api.DoctorWarn {
				detail += ": their pushes and pull requests are refused"
			}
		}
		out = append(out, api.DoctorCheck{Name: "forge " + f.Host, Level: level, Detail: detail})
	}
	for _, host := range slices.Sorted(maps.Keys(byHost)) {
		if !known[host] {
			out = append(out, api.DoctorCheck{Name: "forge " + host, Level: api.DoctorWarn, Detail: fmt.Sprintf(
				"%s with a repository on %s, which has no [forges.%q] table: their pull requests are refused", plural(byHost[host].repos, "project", "projects"), host, host)})
		}
	}
	return out
}

// secretSet reports whether the project has a secret named key (its
// name only: SecretKeys never returns values).
func secretSet(uses Uses, project, key string) bool {
	if uses == nil {
		return false
	}
	keys, err := uses.SecretKeys(project)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(keys, func(k api.SecretInfo) bool { return k.Key == key })
}
