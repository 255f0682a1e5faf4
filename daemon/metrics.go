package daemon

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

// NewMetrics registers the daemon's series (and Go runtime and process
// collectors) on a new registry.
func NewMetrics() *Metrics {
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

// LXDError counts one failed LXD request.
func (m *Metrics) LXDError() {
	if m != nil {
		m.lxdErrors.Inc()
	}
}

func (m *Metrics) runStarted() {
	if m != nil {
		m.runs.Inc()
		m.runsActive.Inc()
	}
}

func (m *Metrics) runFinished() {
	if m != nil {
		m.runsActive.Dec()
	}
}

func (m *Metrics) runFailed() {
	if m != nil {
		m.runErrors.Inc()
	}
}

func (m *Metrics) eventAppended() {
	if m != nil {
		m.events.Inc()
	}
}

func (m *Metrics) appendFailed() {
	if m != nil {
		m.appendErrors.Inc()
	}
}

func (m *Metrics) subscriberAdded() {
	if m != nil {
		m.subscribers.Inc()
	}
}

func (m *Metrics) subscriberRemoved() {
	if m != nil {
		m.subscribers.Dec()
	}
}

func (m *Metrics) subscriberDropped() {
	if m != nil {
		m.droppedSubscriber.Inc()
	}
}

// usage counts one run's recorded usage.
func (m *Metrics) usage(u store.UsageRecord) {
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

func (m *Metrics) setStateFree(n int64) {
	if m != nil {
		m.stateFree.Set(float64(n))
	}
}

func (m *Metrics) setUnrepaired(n int) {
	if m != nil {
		m.unrepaired.Set(float64(n))
	}
}
