// Package metrics owns remoted's Prometheus series on a registry of their
// own: runs, events, followers, LXD errors, usage and storage. The run
// hub, the prompt service and the HTTP layer record into it; it imports
// only the store's usage record type and must never import the daemon's
// other packages.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"remote/daemon/store"
)

// Metrics are the daemon's Prometheus series, on a registry of their own
// (no global default registry). A nil *Metrics records nothing.
type Metrics struct {
	reg               *prometheus.Registry
	runs              prometheus.Counter
	runsActive        prometheus.Gauge
	runErrors         prometheus.Counter
	events            prometheus.Counter
	appendErrors      prometheus.Counter
	subscribers       prometheus.Gauge
	droppedSubscriber prometheus.Counter
	lxdErrors         prometheus.Counter
	tokens            *prometheus.CounterVec
	cost              *prometheus.CounterVec
	stateFree         prometheus.Gauge
	unrepaired        prometheus.Gauge
}

// New registers the daemon's series (and Go runtime and process
// collectors) on a new registry.
func New() *Metrics {
	m := &Metrics{
		reg:               prometheus.NewRegistry(),
		runs:              prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_runs_total", Help: "Runs started."}),
		runsActive:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "remoted_runs_active", Help: "Runs in flight."}),
		runErrors:         prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_run_errors_total", Help: "Runs that ended with a persisted error."}),
		events:            prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_events_total", Help: "Chat events appended durably."}),
		appendErrors:      prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_append_errors_total", Help: "Chat events the store failed to append."}),
		subscribers:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "remoted_subscribers", Help: "Connected chat followers (WebSocket, NDJSON, SSE)."}),
		droppedSubscriber: prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_subscribers_dropped_total", Help: "Followers dropped for falling too far behind."}),
		lxdErrors:         prometheus.NewCounter(prometheus.CounterOpts{Name: "remoted_lxd_errors_total", Help: "Failed LXD requests seen by the daemon."}),
		tokens:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "remoted_usage_tokens_total", Help: "Tokens used by completed runs, by provider and kind (input, output, cache_read, cache_creation)."}, []string{"provider", "kind"}),
		cost:              prometheus.NewCounterVec(prometheus.CounterOpts{Name: "remoted_usage_cost_usd_total", Help: "Cost in USD of completed runs, where the CLI reports it, by provider."}, []string{"provider"}),
		stateFree:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "remoted_state_free_bytes", Help: "Free space of the state directory's filesystem at the last check."}),
		unrepaired:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "remoted_chats_unrepaired", Help: "Chats whose last run's end (restart recovery, a run stopped by a full disk) is not stored yet."}),
	}
	m.reg.MustRegister(m.runs, m.runsActive, m.runErrors, m.events, m.appendErrors, m.subscribers, m.droppedSubscriber, m.lxdErrors,
		m.stateFree, m.unrepaired, m.tokens, m.cost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry the series live on, so other components (the
// projects routes, lxdexec wiring) can register theirs beside them.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// WarmPool exports the warm container pool ([projects] warm) from stats:
// remoted_warm_containers{state="ready"|"creating"} and
// remoted_warm_claims_total{result="claimed"|"missed"} (a new project on
// the default image and pool that found none ready).
func (m *Metrics) WarmPool(stats func() (ready, creating int, claims, misses uint64)) {
	if m == nil {
		return
	}
	gauge := func(state string, pick func(r, c int) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "remoted_warm_containers", Help: "Warm containers ready to be claimed, or being created.",
			ConstLabels: prometheus.Labels{"state": state}}, func() float64 { r, c, _, _ := stats(); return float64(pick(r, c)) })
	}
	counter := func(result string, pick func(c, m uint64) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "remoted_warm_claims_total", Help: "New projects on the default image and pool, by whether a warm container was ready.",
			ConstLabels: prometheus.Labels{"result": result}}, func() float64 { _, _, c, mi := stats(); return float64(pick(c, mi)) })
	}
	m.reg.MustRegister(gauge("ready", func(r, _ int) int { return r }), gauge("creating", func(_, c int) int { return c }),
		counter("claimed", func(c, _ uint64) uint64 { return c }), counter("missed", func(_, mi uint64) uint64 { return mi }))
}

// LXDError counts one failed LXD request.
func (m *Metrics) LXDError() {
	if m != nil {
		m.lxdErrors.Inc()
	}
}

// RunStarted counts a started run.
func (m *Metrics) RunStarted() {
	if m != nil {
		m.runs.Inc()
		m.runsActive.Inc()
	}
}

// RunFinished counts a run that ended.
func (m *Metrics) RunFinished() {
	if m != nil {
		m.runsActive.Dec()
	}
}

// RunFailed counts a run that ended with a persisted error.
func (m *Metrics) RunFailed() {
	if m != nil {
		m.runErrors.Inc()
	}
}

// EventAppended counts an event stored durably.
func (m *Metrics) EventAppended() {
	if m != nil {
		m.events.Inc()
	}
}

// AppendFailed counts an event the store failed to append.
func (m *Metrics) AppendFailed() {
	if m != nil {
		m.appendErrors.Inc()
	}
}

// SubscriberAdded counts a connected follower.
func (m *Metrics) SubscriberAdded() {
	if m != nil {
		m.subscribers.Inc()
	}
}

// SubscriberRemoved counts a follower that left.
func (m *Metrics) SubscriberRemoved() {
	if m != nil {
		m.subscribers.Dec()
	}
}

// SubscriberDropped counts a follower dropped for lagging.
func (m *Metrics) SubscriberDropped() {
	if m != nil {
		m.droppedSubscriber.Inc()
	}
}

// Usage counts one run's recorded usage.
func (m *Metrics) Usage(u store.UsageRecord) {
	if m == nil {
		return
	}
	m.tokens.WithLabelValues(u.Provider, "input").Add(float64(u.InputTokens))
	m.tokens.WithLabelValues(u.Provider, "output").Add(float64(u.OutputTokens))
	m.tokens.WithLabelValues(u.Provider, "cache_read").Add(float64(u.CacheReadTokens))
	m.tokens.WithLabelValues(u.Provider, "cache_creation").Add(float64(u.CacheCreationTokens))
	if u.CostUSD > 0 {
		m.cost.WithLabelValues(u.Provider).Add(u.CostUSD)
	}
}

// SetStateFree records the state directory's free bytes.
func (m *Metrics) SetStateFree(n int64) {
	if m != nil {
		m.stateFree.Set(float64(n))
	}
}

// SetUnrepaired records how many chats have an unstored run end.
func (m *Metrics) SetUnrepaired(n int) {
	if m != nil {
		m.unrepaired.Set(float64(n))
	}
}
