package lxdexec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Operation status codes (status_code of operations and instances).
const (
	StatusOperationCreated = 100
	StatusStarted          = 101
	StatusStopped          = 102
	StatusRunning          = 103
	StatusCancelling       = 104
	StatusPending          = 105
	StatusSuccess          = 200
	StatusFailure          = 400
	StatusCancelled        = 401
)

// Operation is LXD's background operation object. Unknown fields are
// ignored; Resources is kept raw because its shape differs across versions.
type Operation struct {
	ID          string          `json:"id"`
	Class       string          `json:"class"`
	Description string          `json:"description"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Status      string          `json:"status"`
	StatusCode  int             `json:"status_code"`
	Resources   json.RawMessage `json:"resources"`
	Metadata    json.RawMessage `json:"metadata"`
	MayCancel   bool            `json:"may_cancel"`
	Err         string          `json:"err"`
	ErrCode     int             `json:"err_code"`
	Location    string          `json:"location"`
}

// Final reports whether the operation has ended (Success, Failure or
// Cancelled).
func (o *Operation) Final() bool { return o.StatusCode >= StatusSuccess }

// decodeOperation decodes an operation object and checks it has an id.
func decodeOperation(raw []byte) (*Operation, error) {
	var op Operation
	if err := json.Unmarshal(raw, &op); err != nil {
		return nil, fmt.Errorf("lxd: decode operation: %v: %w", err, ErrProtocol)
	}
	if op.ID == "" {
		return nil, fmt.Errorf("lxd: operation without id: %w", ErrProtocol)
	}
	return &op, nil
}

// opError returns nil for a successful operation and the typed error of a
// failed or cancelled one.
func opError(path string, op *Operation) error {
	switch op.StatusCode {
	case StatusSuccess:
		return nil
	case StatusCancelled:
		return &Error{Path: path, StatusCode: op.ErrCode, Message: nonEmpty(op.Err, "operation cancelled"), class: ErrOperationCancelled}
	default:
		return &Error{Path: path, StatusCode: op.ErrCode, Message: nonEmpty(op.Err, op.Status), class: ErrOperationFailed}
	}
}

func nonEmpty(s, alt string) string {
	if s != "" {
		return s
	}
	return alt
}

// waitPoll is the server-side wait per /wait request; the loop repeats it
// until the operation ends or ctx is done.
const waitPoll = 30

// WaitOperation waits until the operation (its URL "/1.0/operations/<id>"
// or bare id) ends and returns it. A failed or cancelled operation returns
// the operation as far as known together with an error wrapping
// ErrOperationFailed / ErrOperationCancelled. It accepts every /wait
// dialect: LXD 5.0.2 and Incus answer with the operation (still Running
// on timeout); LXD 5.0.3+ answer HTTP 200 with an error envelope carrying
// the operation's error or "context deadline exceeded", after which the
// operation is read directly to learn its real state. ctx ends the wait, not
// the operation. An operation LXD no longer knows (it forgets finished ones
// after about 5 s) gives an error matching ErrOperationForgotten and
// ErrNotFound.
func (c *Client) WaitOperation(ctx context.Context, op string) (*Operation, error) {
	path := op
	if !strings.HasPrefix(path, "/") {
		path = "/1.0/operations/" + path
	}
	for {
		timeout := waitPoll
		if dl, ok := ctx.Deadline(); ok {
			if left := int(time.Until(dl) / time.Second); left < timeout {
				timeout = max(left, 1)
			}
		}
		r, err := c.do(ctx, http.MethodGet, fmt.Sprintf("%s/wait?timeout=%d", path, timeout), nil, "", "", nil)
		var lerr *Error
		switch {
		case err == nil:
			o, derr := decodeOperation(r.Metadata)
			if derr != nil {
				return nil, fmt.Errorf("lxd wait %s: %w", path, derr)
			}
			if o.Final() {
				return o, opError(path, o)
			}
		case errors.As(err, &lerr) && r != nil && r.HTTPStatus == http.StatusOK:
			// 5.0.3+: the error envelope is the op's error or the wait's
			// timeout. The op object (and e.g. exec's return code) is only
			// readable directly, for ~5 s after it ends.
			o, gerr := c.GetOperation(ctx, path)
			if errors.Is(gerr, ErrNotFound) {
				if lerr.Message == "context deadline exceeded" {
					// Our wait timed out, then the op ended and was
					// forgotten before the read: its result is unknown.
					return nil, forgotten(gerr)
				}
				return nil, &Error{Path: path, StatusCode: lerr.StatusCode, Message: lerr.Message, class: ErrOperationFailed}
			}
			if gerr != nil {
				return nil, gerr
			}
			if o.Final() {
				return o, opError(path, o)
			}
		default:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("lxd wait %s: %w", path, ctx.Err())
			}
			return nil, forgotten(err)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("lxd wait %s: %w", path, ctx.Err())
		}
	}
}

// forgotten classes a 404 for an operation's URL as ErrOperationForgotten.
func forgotten(err error) error {
	var lerr *Error
	if errors.As(err, &lerr) && lerr.StatusCode == http.StatusNotFound {
		lerr.class = ErrOperationForgotten
	}
	return err
}

// GetOperation reads an operation (URL or bare id) once.
func (c *Client) GetOperation(ctx context.Context, op string) (*Operation, error) {
	path := op
	if !strings.HasPrefix(path, "/") {
		path = "/1.0/operations/" + path
	}
	r, err := c.do(ctx, http.MethodGet, path, nil, "", "", nil)
	if err != nil {
		return nil, err
	}
	return decodeOperation(r.Metadata)
}

// CancelOperation asks LXD to cancel an operation (DELETE). Most LXD
// versions refuse this for exec, create, start and stop (ErrBadRequest);
// LXD 6.9 cancels anything, killing an exec'd command.
func (c *Client) CancelOperation(ctx context.Context, op string) error {
	path := op
	if !strings.HasPrefix(path, "/") {
		path = "/1.0/operations/" + path
	}
	_, err := c.do(ctx, http.MethodDelete, path, nil, "", "", nil)
	return err
}

// startOperation sends a request (under If-Match etag when not "") that
// should answer async and returns the operation URL and its initial
// object. A sync answer (some servers finish small things at once) returns
// "" and nil.
func (c *Client) startOperation(ctx context.Context, method, path string, body any, etag string) (string, *Operation, error) {
	r, err := c.Query(ctx, method, path, body, etag)
	if err != nil {
		return "", nil, err
	}
	if r.Type != "async" {
		return "", nil, nil
	}
	op, err := decodeOperation(r.Metadata)
	if err != nil {
		return "", nil, fmt.Errorf("lxd %s %s: %w", method, stripQuery(path), err)
	}
	url := r.Operation
	if url == "" {
		url = "/1.0/operations/" + op.ID
	}
	return stripQuery(url), op, nil
}

// A check decides the outcome of an operation LXD forgot before its result
// was read, from what the operation was to make or change (the instance,
// its state, a snapshot): nil when the change is there, else an error
// saying what was found instead. started is the operation as LXD first
// answered it.
type check func(ctx context.Context, started *Operation) error

// run sends a request (under If-Match etag when not "") and waits for its
// operation, if any. If LXD forgot the operation before the wait read its
// result (a loaded host, a late wait), chk decides from the resource.
func (c *Client) run(ctx context.Context, method, path string, body any, etag string, chk check) (*Operation, error) {
	url, started, err := c.startOperation(ctx, method, path, body, etag)
	if err != nil || url == "" {
		return nil, err
	}
	if c.beforeWait != nil {
		c.beforeWait(url)
	}
	op, err := c.WaitOperation(ctx, url)
	if errors.Is(err, ErrOperationForgotten) && ctx.Err() == nil {
		cerr := chk(ctx, started)
		if cerr == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("lxd %s %s: LXD forgot operation %s before we read its result, and %w: %w",
			method, stripQuery(path), started.ID, cerr, ErrOperationForgotten)
	}
	var lerr *Error
	if errors.As(err, &lerr) {
		// Label the failure with the request that started it.
		lerr.Method, lerr.Path = method, stripQuery(path)
	}
	return op, err
}

// clockSlack is how much older than its operation a created object may
// look: cluster members' clocks differ, and a server may store times to
// the second.
const clockSlack = time.Second

// createdCheck checks that the instance or snapshot at path (named what)
// exists and is not older than the operation: a create that failed on a
// name in use (LXD 5.0 says so only in the operation) leaves the older one.
func (c *Client) createdCheck(path, what string) check {
	return func(ctx context.Context, started *Operation) error {
		var obj struct {
			CreatedAt time.Time `json:"created_at"`
		}
		err := c.syncJSON(ctx, http.MethodGet, path, nil, &obj)
		switch {
		case errors.Is(err, ErrNotFound):
			return fmt.Errorf("%s does not exist", what)
		case err != nil:
			return fmt.Errorf("reading %s failed: %w", what, err)
		case obj.CreatedAt.Before(started.CreatedAt.Add(-clockSlack)):
			return fmt.Errorf("%s is older than the operation (created %s)", what, obj.CreatedAt.Format(time.RFC3339))
		}
		return nil
	}
}

// deletedCheck checks that the instance or snapshot at path is gone.
func (c *Client) deletedCheck(path, what string) check {
	return func(ctx context.Context, _ *Operation) error {
		err := c.syncJSON(ctx, http.MethodGet, path, nil, nil)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("reading %s failed: %w", what, err)
		}
		return fmt.Errorf("%s still exists", what)
	}
}

// instanceCheck checks the instance against ok, which says what differs
// from the change asked for ("" when nothing).
func (c *Client) instanceCheck(name string, ok func(*Instance) string) check {
	return func(ctx context.Context, _ *Operation) error {
		inst, _, err := c.Instance(ctx, name)
		if err != nil {
			return fmt.Errorf("reading instance %q failed: %w", name, err)
		}
		if diff := ok(inst); diff != "" {
			return fmt.Errorf("instance %q %s", name, diff)
		}
		return nil
	}
}

// unchecked is the check of an operation whose result cannot be read
// back, e.g. a snapshot restore.
func unchecked(what string) check {
	return func(context.Context, *Operation) error {
		return fmt.Errorf("whether %s cannot be checked", what)
	}
}
