package daemon

import (
	"remote/daemon/fork"
	"remote/daemon/metrics"
	"remote/daemon/prompt"
)

// The prompt service's types the server is built from, under the names the
// wiring (cmd/remoted) and the handlers use.
type (
	// Store is the daemon's durable state (prompt.Store).
	Store = prompt.Store
	// Registry is the provider registry (prompt.Registry).
	Registry = prompt.Registry
	// Roots are the directories loose chats may run in (prompt.Roots).
	Roots = prompt.Roots
	// QueueBounds bound the bytes queued prompts store (prompt.QueueBounds).
	QueueBounds = prompt.QueueBounds
	// Service is the prompt service (prompt.Service).
	Service = prompt.Service
	// Metrics are the daemon's Prometheus series (package metrics).
	Metrics = metrics.Metrics
	// ContainerForker is the project side of a fork with a container
	// (fork.ContainerForker).
	ContainerForker = fork.ContainerForker
)

// NewMetrics registers the daemon's series on a new registry.
func NewMetrics() *Metrics { return metrics.New() }
