package lxdexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Instance is LXD's instance object (GET /1.0/instances/{name}). Unknown
// fields are ignored.
type Instance struct {
	Name            string                       `json:"name"`
	Description     string                       `json:"description"`
	Status          string                       `json:"status"`
	StatusCode      int                          `json:"status_code"`
	Type            string                       `json:"type"`
	Architecture    string                       `json:"architecture"`
	Config          map[string]string            `json:"config"`
	Devices         map[string]map[string]string `json:"devices"`
	ExpandedConfig  map[string]string            `json:"expanded_config"`
	ExpandedDevices map[string]map[string]string `json:"expanded_devices"`
	Profiles        []string                     `json:"profiles"`
	Ephemeral       bool                         `json:"ephemeral"`
	Stateful        bool                         `json:"stateful"`
	Location        string                       `json:"location"`
	Project         string                       `json:"project"`
	CreatedAt       time.Time                    `json:"created_at"`
	LastUsedAt      time.Time                    `json:"last_used_at"`
}

// Running reports whether the instance's status is Running.
func (i *Instance) Running() bool { return i.StatusCode == StatusRunning }

// InstanceSource names the image an instance is created from: Alias or
// Fingerprint, local or (Mode "pull") on the image server Server speaking
// Protocol ("simplestreams" or "lxd"), whose TLS certificate LXD pins to
// Certificate (PEM) when set. Type defaults to "image".
type InstanceSource struct {
	Type        string `json:"type"`
	Alias       string `json:"alias,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	Mode        string `json:"mode,omitempty"`
	Server      string `json:"server,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	Certificate string `json:"certificate,omitempty"`
}

// InstancesPost is the body of an instance creation. Type defaults to
// "container"; nil Profiles means ["default"]; config values are strings.
type InstancesPost struct {
	Name        string                       `json:"name"`
	Type        string                       `json:"type"`
	Source      InstanceSource               `json:"source"`
	Profiles    []string                     `json:"profiles"`
	Config      map[string]string            `json:"config"`
	Devices     map[string]map[string]string `json:"devices"`
	Description string                       `json:"description,omitempty"`
	Ephemeral   bool                         `json:"ephemeral,omitempty"`
	// Target places the instance on a cluster member or "@group" (sent as
	// ?target=, only to a clustered server); "" uses Options.Target.
	Target string `json:"-"`
}

// InstancePatch is a partial update (PATCH): Config keys are merged and a
// key set to "" is deleted; Devices are merged by device name (and
// hot-plugged into a running container). Nil fields are left unchanged.
type InstancePatch struct {
	Config      map[string]string            `json:"config,omitempty"`
	Devices     map[string]map[string]string `json:"devices,omitempty"`
	Description *string                      `json:"description,omitempty"`
	Profiles    []string                     `json:"profiles,omitempty"`
}

// StateRequest changes an instance's state. Action is start, stop,
// restart, freeze or unfreeze. Timeout (seconds) bounds a graceful stop or
// restart; 0 means DefaultStopTimeout (never "kill at once": use Force for
// that). A graceful stop that times out is escalated to a forced one.
type StateRequest struct {
	Action   string `json:"action"`
	Timeout  int    `json:"timeout"`
	Force    bool   `json:"force"`
	Stateful bool   `json:"stateful"`
}

// DefaultStopTimeout is the graceful stop timeout used when
// StateRequest.Timeout is 0.
const DefaultStopTimeout = 30

// Instance returns the named instance and its ETag (for If-Match).
func (c *Client) Instance(ctx context.Context, name string) (*Instance, string, error) {
	if err := checkName(name); err != nil {
		return nil, "", err
	}
	r, err := c.Query(ctx, http.MethodGet, c.instancePath(name, "", nil), nil, "")
	if err != nil {
		return nil, "", err
	}
	var inst Instance
	if err := unmarshalMeta(r, &inst); err != nil {
		return nil, "", fmt.Errorf("lxd get instance %q: %w", name, err)
	}
	return &inst, r.ETag, nil
}

// Instances lists the project's instances with their full objects.
func (c *Client) Instances(ctx context.Context) ([]Instance, error) {
	var list []Instance
	if err := c.syncJSON(ctx, http.MethodGet, c.instancePath("", "", url.Values{"recursion": {"1"}}), nil, &list); err != nil {
		return nil, err
	}
	return list, nil
}

// CreateInstance creates an instance (stopped) and waits for it. A name in
// use gives an error matching ErrConflict on every server version (sync
// 409, or LXD 5.0's failed operation saying "already exists"). A missing
// image alias gives ErrNotFound.
func (c *Client) CreateInstance(ctx context.Context, req InstancesPost) error {
	if err := checkName(req.Name); err != nil {
		return err
	}
	if req.Type == "" {
		req.Type = "container"
	}
	if req.Source.Type == "" {
		req.Source.Type = "image"
	}
	if req.Profiles == nil {
		req.Profiles = []string{"default"}
	}
	if req.Config == nil {
		req.Config = map[string]string{}
	}
	if req.Devices == nil {
		req.Devices = map[string]map[string]string{}
	}
	var q url.Values
	if t := nonEmpty(req.Target, c.target); t != "" && c.server.Clustered {
		q = url.Values{"target": {t}}
	}
	what := fmt.Sprintf("instance %q", req.Name)
	_, err := c.run(ctx, http.MethodPost, c.instancePath("", "", q), req, "", c.createdCheck(c.instancePath(req.Name, "", nil), what))
	var lerr *Error
	// LXD 5.0 reports a duplicate name only through the failed operation;
	// its message is the only signal.
	if errors.As(err, &lerr) && errors.Is(lerr.class, ErrOperationFailed) && MsgExists.In(lerr.Message) {
		lerr.class = ErrConflict
	}
	if err != nil {
		return fmt.Errorf("create instance %q: %w", req.Name, err)
	}
	return nil
}

// UpdateInstance applies a partial update (PATCH). etag, when not empty, is
// sent as If-Match; a mismatch gives ErrPreconditionFailed.
func (c *Client) UpdateInstance(ctx context.Context, name string, patch InstancePatch, etag string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if _, err := c.run(ctx, http.MethodPatch, c.instancePath(name, "", nil), patch, etag, c.instanceCheck(name, patch.missing)); err != nil {
		return fmt.Errorf("update instance %q: %w", name, err)
	}
	return nil
}

// missing says which part of the patch inst lacks ("" when none).
func (p InstancePatch) missing(inst *Instance) string {
	for k, v := range p.Config {
		if got, ok := inst.Config[k]; got != v || ok && v == "" { // "" deletes the key
			return fmt.Sprintf("has config %s=%q, not %q", k, got, v)
		}
	}
	for d, dev := range p.Devices {
		if !maps.Equal(inst.Devices[d], dev) {
			return fmt.Sprintf("has device %s=%v, not %v", d, inst.Devices[d], dev)
		}
	}
	if p.Description != nil && inst.Description != *p.Description {
		return fmt.Sprintf("has description %q, not %q", inst.Description, *p.Description)
	}
	if p.Profiles != nil && !slices.Equal(inst.Profiles, p.Profiles) {
		return fmt.Sprintf("has profiles %v, not %v", inst.Profiles, p.Profiles)
	}
	return ""
}

// SetState starts, stops, restarts, freezes or unfreezes an instance and
// waits for it. Starting a running or stopping a stopped instance gives an
// error matching ErrAlreadyInState.
func (c *Client) SetState(ctx context.Context, name string, req StateRequest) error {
	if err := checkName(name); err != nil {
		return err
	}
	if req.Timeout == 0 {
		req.Timeout = DefaultStopTimeout
	}
	chk := c.instanceCheck(name, func(inst *Instance) string {
		want, known := actionStatus[req.Action]
		switch {
		case !known:
			return fmt.Sprintf("cannot be checked for action %q", req.Action)
		case inst.Status != want:
			return fmt.Sprintf("is %s, not %s", inst.Status, want)
		}
		return ""
	})
	_, err := c.run(ctx, http.MethodPut, c.instancePath(name, "/state", nil), req, "", chk)
	// LXD refuses a state change while another operation still holds the
	// instance ("Instance is busy running a "stop" operation": its lock
	// outlives the operation by a moment, e.g. right after a stop made
	// outside the daemon). Wait for it, a bounded time.
	if err = waitBusy(ctx, err, func() error {
		_, err := c.run(ctx, http.MethodPut, c.instancePath(name, "/state", nil), req, "", chk)
		return err
	}); err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s instance %q: %w", req.Action, name, err)
	}
	var lerr *Error
	if errors.As(err, &lerr) && errors.Is(lerr.class, ErrOperationFailed) {
		// Matched by text: LXD has no code for these.
		if MsgAlreadyRunning.In(lerr.Message) || MsgAlreadyStopped.In(lerr.Message) {
			lerr.class = ErrAlreadyInState
		} else {
			if (req.Action == "stop" || req.Action == "restart") && !req.Force {
				// A graceful stop that failed (timeout, frozen): escalate.
				req.Force = true
				_, err = c.run(ctx, http.MethodPut, c.instancePath(name, "/state", nil), req, "", chk)
				if err == nil {
					return nil
				}
				if !errors.As(err, &lerr) {
					lerr = &Error{}
				}
				// The container stopped between the failed graceful stop
				// and the forced one: what the caller asked for holds.
				if MsgAlreadyStopped.In(lerr.Message) {
					return nil
				}
			}
			// LXD 5.0 can fail a forced stop with "operation timed out
			// after 30s": now and then it serves none of its API (not even
			// the container's own stop hook) until that lock times out, and
			// the container stops right after (seen here; also
			// canonical/lxd#11421). Trust the state, not the operation.
			if req.Action == "stop" && MsgTimedOut.In(lerr.Message) && c.awaitStatus(ctx, name, "Stopped", stopGrace) {
				return nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s instance %q: %w", req.Action, name, err)
	}
	return nil
}

// busyWait bounds how long SetState waits for another operation on the
// instance to let go of it.
const busyWait = 30 * time.Second

// waitBusy retries do, with backoff for at most busyWait, while err (its
// last answer) says another operation holds the instance; it returns the
// last answer, or that answer unchanged when ctx ends.
func waitBusy(ctx context.Context, err error, do func() error) error {
	for delay, deadline := 50*time.Millisecond, time.Now().Add(busyWait); errors.Is(err, ErrBusy) && time.Now().Before(deadline); delay = min(2*delay, time.Second) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		err = do()
	}
	return err
}

// actionStatus is the status each state action leaves the instance in.
var actionStatus = map[string]string{"start": "Running", "restart": "Running", "unfreeze": "Running",
	"stop": "Stopped", "freeze": "Frozen"}

// stopGrace bounds how long SetState waits for a container whose stop
// operation failed to reach Stopped anyway.
const stopGrace = 2 * time.Minute

// awaitStatus polls the instance until its status is want, for at most
// limit (and the context). It reports whether the status was reached.
func (c *Client) awaitStatus(ctx context.Context, name, want string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if inst, _, err := c.Instance(ctx, name); err == nil && inst.Status == want {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// DeleteInstance deletes a stopped instance and waits for it. A running
// instance gives ErrBadRequest; see ForceDeleteInstance.
func (c *Client) DeleteInstance(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	path := c.instancePath(name, "", nil)
	chk := c.deletedCheck(path, fmt.Sprintf("instance %q", name))
	del := func() error { _, err := c.run(ctx, http.MethodDelete, path, nil, "", chk); return err }
	// A stop LXD reported failed ("timed out") while the container stopped
	// anyway leaves its lock behind a while: wait for it, as SetState does.
	if err := waitBusy(ctx, del(), del); err != nil {
		return fmt.Errorf("delete instance %q: %w", name, err)
	}
	return nil
}

// ForceDeleteInstance kills the instance if it runs, then deletes it. A
// missing instance is not an error.
func (c *Client) ForceDeleteInstance(ctx context.Context, name string) error {
	err := c.SetState(ctx, name, StateRequest{Action: "stop", Force: true})
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil && !errors.Is(err, ErrAlreadyInState) {
		return err
	}
	err = c.DeleteInstance(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// AddProxyDevice adds (or replaces) a proxy device named device that
// listens inside the instance (bind=instance) on listen, e.g.
// "tcp:127.0.0.1:8080", and connects to connect on the host, e.g.
// "tcp:127.0.0.1:39000". It is hot-plugged into a running container.
func (c *Client) AddProxyDevice(ctx context.Context, instance, device string, listen, connect string) error {
	if device == "" || listen == "" || connect == "" {
		return fmt.Errorf("add proxy device to %q: device %q, listen %q and connect %q must all be set", instance, device, listen, connect)
	}
	patch := InstancePatch{Devices: map[string]map[string]string{device: {
		"type": "proxy", "bind": "instance", "listen": listen, "connect": connect,
	}}}
	if err := c.UpdateInstance(ctx, instance, patch, ""); err != nil {
		return fmt.Errorf("add proxy device %q: %w", device, err)
	}
	return nil
}

// checkName rejects names that cannot be instance names before they reach
// a URL.
func checkName(name string) error {
	if name == "" || len(name) > 63 || strings.ContainsAny(name, "/?#% \t\n") {
		return fmt.Errorf("lxd: invalid instance name %q: %w", name, ErrBadRequest)
	}
	return nil
}

func unmarshalMeta(r *Response, out any) error {
	if err := json.Unmarshal(r.Metadata, out); err != nil {
		return fmt.Errorf("decode metadata: %v: %w", err, ErrProtocol)
	}
	return nil
}

// MovePrefix starts the temporary name LXD gives an instance while it
// moves it to another cluster member (evacuation, restore, lxc move
// --target): the copy on the new member is "lxd-move-of-<volatile.uuid>"
// until the old instance is deleted and the copy renamed.
const MovePrefix = "lxd-move-of-"

// ClusterMember is one member as GET /1.0/cluster/members/<name> reports
// it.
type ClusterMember struct {
	ServerName string `json:"server_name"`
	URL        string `json:"url"`
	Status     string `json:"status"` // "Online", "Evacuated", "Offline", ...
	Message    string `json:"message"`
}

// ClusterMember returns the named cluster member.
func (c *Client) ClusterMember(ctx context.Context, name string) (*ClusterMember, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var m ClusterMember
	if err := c.syncJSON(ctx, http.MethodGet, "/1.0/cluster/members/"+url.PathEscape(name), nil, &m); err != nil {
		return nil, err
	}
	return &m, nil
}
