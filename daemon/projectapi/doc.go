// Package projectapi owns the project routes of the API: projects
// (create, list, show, delete, start, stop, patch, limits), their secrets,
// exec and the interactive terminal, checkpoints (list, restore) and the
// project side of a fork with a container (the image and CLI store
// routes are daemon/hostapi's); and ProjectChatCheck, which admits
// chats bound to a project. It joins the daemon's route table
// through daemon.RouteProvider (Projects.Routes), so its handlers get the
// same peer check, access check, audit line and error envelope as every
// other route, and reaches the chats only through the ChatStore and
// ChatHub it is handed at construction (ProjectsOptions.Chats, Hub).
//
// Its errors are errdefs classes (daemon.ToHTTP maps them). It builds on
// daemon (the route table and its helpers), prompt (the Store it shares),
// provisioning, lxdexec and the store; package daemon and the prompt
// service must never import it (the composition root, daemon/system,
// wires it in).
package projectapi
