// Package hostapi serves the routes of host administration: the local LXD
// images projects start from (ImageRoutes: GET /v1/images to any named
// user, POST /v1/images only to root and the daemon's own uid) and the
// daemon's CLI store (CLIStoreRoutes: the list to any allowed peer,
// install and select only to root and the daemon's own uid). What it
// changes reaches every project, so nothing else may change it.
//
// It decodes, calls lxdimage and clistore, and encodes, on the daemon's
// route helpers; it never imports the composition root (daemon/system)
// or another route package.
package hostapi
