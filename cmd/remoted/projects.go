package main

import (
	"github.com/hashicorp/go-hclog"

	"remote/config"
	"remote/daemon"
	"remote/daemon/store"
	"remote/lxdexec"
	"remote/providers"
)

// projectWiring is what the projects feature adds to remoted.
type projectWiring struct {
	Chats      daemon.ProjectChats          // lets chats name a project
	Routes     []daemon.RouteProvider       // the /v1/projects routes
	Preparer   providers.ProjectPreparer    // S9 preparation for project runs
	Containers providers.ContainerLaunchers // LXD exec launchers
}

// wireProjects is the seam for the projects work: it builds the project
// routes, the preparer and the container launchers from the config, the
// store and the LXD client (nil when LXD is unreachable at start-up). Until
// projects are wired it returns nothing and project chats are refused.
func wireProjects(cfg config.Config, st *store.Store, lxd *lxdexec.Client, log hclog.Logger, metrics *daemon.Metrics) (projectWiring, error) {
	_, _, _, _, _ = cfg, st, lxd, log, metrics
	return projectWiring{}, nil
}
