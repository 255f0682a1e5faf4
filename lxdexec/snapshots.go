package lxdexec

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Snapshot is LXD's instance snapshot object
// (GET /1.0/instances/{name}/snapshots/{snap}). Name is the snapshot's own
// name, without the "instance/" prefix. Size is in bytes when the server
// reports it (0 otherwise).
type Snapshot struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Stateful  bool      `json:"stateful"`
	Size      int64     `json:"size"`
}

// CreateSnapshot snapshots the instance's filesystem (stateless) as name
// and waits for it. A zero expires leaves the snapshot without expiry.
func (c *Client) CreateSnapshot(ctx context.Context, instance, name string, expires time.Time) error {
	if err := checkName(instance); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	body := map[string]any{"name": name, "stateful": false}
	if !expires.IsZero() {
		body["expires_at"] = expires.UTC().Format(time.RFC3339)
	}
	what := fmt.Sprintf("snapshot %q of %q", name, instance)
	path := c.instancePath(instance, "/snapshots/"+url.PathEscape(name), nil)
	if _, err := c.run(ctx, http.MethodPost, c.instancePath(instance, "/snapshots", nil), body, "", c.createdCheck(path, what)); err != nil {
		return fmt.Errorf("snapshot instance %q as %q: %w", instance, name, err)
	}
	return nil
}

// Snapshots lists the instance's snapshots with their full objects.
func (c *Client) Snapshots(ctx context.Context, instance string) ([]Snapshot, error) {
	if err := checkName(instance); err != nil {
		return nil, err
	}
	var list []Snapshot
	if err := c.syncJSON(ctx, http.MethodGet, c.instancePath(instance, "/snapshots", url.Values{"recursion": {"1"}}), nil, &list); err != nil {
		return nil, fmt.Errorf("list snapshots of %q: %w", instance, err)
	}
	for i := range list {
		// LXD 5.0 names a snapshot "instance/snap" in the full object.
		if j := strings.LastIndexByte(list[i].Name, '/'); j >= 0 {
			list[i].Name = list[i].Name[j+1:]
		}
	}
	return list, nil
}

// DeleteSnapshot deletes one snapshot and waits for it.
func (c *Client) DeleteSnapshot(ctx context.Context, instance, name string) error {
	if err := checkName(instance); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	what := fmt.Sprintf("snapshot %q of %q", name, instance)
	path := c.instancePath(instance, "/snapshots/"+url.PathEscape(name), nil)
	if _, err := c.run(ctx, http.MethodDelete, path, nil, "", c.deletedCheck(path, what)); err != nil {
		return fmt.Errorf("delete snapshot %q of %q: %w", name, instance, err)
	}
	return nil
}

// RestoreSnapshot restores the instance's filesystem from the snapshot in
// place (PUT /1.0/instances/{name} {"restore": snap}) and waits for it. A
// running container is restored live by LXD (stopped and started again).
func (c *Client) RestoreSnapshot(ctx context.Context, instance, name string) error {
	if err := checkName(instance); err != nil {
		return err
	}
	if err := checkName(name); err != nil {
		return err
	}
	chk := unchecked(fmt.Sprintf("%q was restored from snapshot %q", instance, name))
	if _, err := c.run(ctx, http.MethodPut, c.instancePath(instance, "", nil), map[string]any{"restore": name}, "", chk); err != nil {
		return fmt.Errorf("restore %q from snapshot %q: %w", instance, name, err)
	}
	return nil
}

// CopyFromSnapshot creates instance name (stopped) as a copy of instance's
// snapshot snap (POST /1.0/instances, source type "copy", without the
// source's other snapshots) and waits for it. Config and devices override
// or add to the copied ones.
func (c *Client) CopyFromSnapshot(ctx context.Context, instance, snap, name string, config map[string]string) error {
	for _, n := range []string{instance, snap, name} {
		if err := checkName(n); err != nil {
			return err
		}
	}
	if config == nil {
		config = map[string]string{}
	}
	body := map[string]any{
		"name":     name,
		"type":     "container",
		"profiles": []string{"default"},
		"config":   config,
		"source":   map[string]any{"type": "copy", "source": instance + "/" + snap, "instance_only": true},
	}
	var q url.Values
	if c.target != "" && c.server.Clustered {
		q = url.Values{"target": {c.target}}
	}
	chk := c.createdCheck(c.instancePath(name, "", nil), fmt.Sprintf("instance %q", name))
	if _, err := c.run(ctx, http.MethodPost, c.instancePath("", "", q), body, "", chk); err != nil {
		return fmt.Errorf("copy %s/%s to %q: %w", instance, snap, name, err)
	}
	return nil
}
