package app

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/reconcile"
	"github.com/mergegate/mergegate/webhook"
)

// Metrics are mergegate's Prometheus series. A nil *Metrics records nothing.
type Metrics struct {
	Registry *prometheus.Registry

	deliveries     *prometheus.CounterVec
	ingestLatency  prometheus.Histogram
	processLatency prometheus.Histogram
	githubCalls    *prometheus.CounterVec // by operation and status; see metrics_github.go
	merges         *prometheus.CounterVec
	bounces        *prometheus.CounterVec
	blocked        *prometheus.CounterVec
	branchUpdates  *prometheus.CounterVec
	gateEvals      *prometheus.CounterVec
	timeToMerge    prometheus.Histogram
	webhookReqs    *prometheus.CounterVec
	redeliveries   *prometheus.CounterVec // see redeliver.go

	// applied and failed are deliveries_total's sums, for GET
	// /deliveries/stats: read without a scrape.
	applied, failed atomic.Int64
}

// NewMetrics registers mergegate's series (and Go's and the process's) on
// a fresh registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{
		Registry: r,
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_deliveries_total",
			Help: "Webhook deliveries processed, by event and outcome (joined, left, ignored, failed, ...)."}, []string{"event", "outcome"}),
		webhookReqs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_webhook_requests_total",
			Help: "Requests to POST /webhook by HTTP status."}, []string{"status"}),
		ingestLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mergegate_ingest_seconds",
			Help: "Time from a delivery's request to its durable 202.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		processLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mergegate_processing_delay_seconds",
			Help: "Time from a delivery's receipt to its application to the queue.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		githubCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_github_calls_total",
			Help: "HTTP requests sent to GitHub, by operation (pulls.get, checks.list-for-ref, ...) and HTTP status (\"error\": no answer)."}, []string{"operation", "status"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_merges_total",
			Help: "Pull requests merged."}, []string{"tenant", "repo"}),
		bounces: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_bounces_total",
			Help: "Pull requests bounced, by reason."}, []string{"reason"}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_blocked_total",
			Help: "Pull requests blocked for the operator, by problem (merge_queue, not_authorized, workflows, merge_method), once per change."}, []string{"problem"}),
		branchUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_branch_updates_total",
			Help: "Branches updated from their base before a merge."}, []string{"tenant", "repo"}),
		gateEvals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_gate_evaluations_total",
			Help: "Gate evaluations by result."}, []string{"result"}),
		timeToMerge: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mergegate_time_to_merge_seconds",
			Help: "Time from joining the queue to the merge.", Buckets: prometheus.ExponentialBuckets(1, 2, 16)}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mergegate_redeliveries_requested_total",
			Help: "Redeliveries the sweep asked GitHub for, by result: accepted (202) or failed."}, []string{"result"}),
	}
	r.MustRegister(m.deliveries, m.webhookReqs, m.ingestLatency, m.processLatency, m.githubCalls,
		m.merges, m.bounces, m.blocked, m.branchUpdates, m.gateEvals, m.timeToMerge, m.redeliveries)
	return m
}

func (m *Metrics) delivery(event, outcome string, received, now time.Time) {
	if m == nil {
		return
	}
	// The event is a label only when it is one mergegate subscribes to:
	// a label never takes a request's text (a non-UTF-8 one panicked).
	m.deliveries.WithLabelValues(webhook.EventLabel(event), outcome).Inc()
	if outcome == "failed" {
		m.failed.Add(1)
	} else {
		m.applied.Add(1)
	}
	if d := now.Sub(received); d >= 0 && outcome != "failed" {
		m.processLatency.Observe(d.Seconds())
	}
}

// Webhook records one POST /webhook answer and its latency.
func (m *Metrics) Webhook(status int, took time.Duration) {
	if m == nil {
		return
	}
	m.webhookReqs.WithLabelValues(itoa(status)).Inc()
	if status == 202 {
		m.ingestLatency.Observe(took.Seconds())
	}
}

// Metrics is the syncs' reconcile.Observer.
var _ reconcile.Observer = (*Metrics)(nil)

// Queue is told of a queue after each sync. Queue depth, oldest entry age
// and lease age are read from the database at scrape time instead
// (metrics_app.go), so that they are right for every tracked repository,
// also one no sync has touched since start.
func (m *Metrics) Queue(leasedo.Key, []leasedo.Item, time.Time) {}

// Merged counts a merge and the time from joining to it.
func (m *Metrics) Merged(k leasedo.Key, waited time.Duration) {
	if m == nil {
		return
	}
	m.merges.WithLabelValues(k.Tenant, k.Repo).Inc()
	if waited > 0 {
		m.timeToMerge.Observe(waited.Seconds())
	}
}

// Bounced counts a bounce by its problem (rules.Action.Problem).
func (m *Metrics) Bounced(_ leasedo.Key, problem string) {
	if m == nil {
		return
	}
	m.bounces.WithLabelValues(problem).Inc()
}

// Blocked counts an entry newly blocked for the operator, by problem.
func (m *Metrics) Blocked(_ leasedo.Key, problem string) {
	if m == nil {
		return
	}
	m.blocked.WithLabelValues(problem).Inc()
}

// BranchUpdated counts an update of a branch from its base.
func (m *Metrics) BranchUpdated(k leasedo.Key) {
	if m == nil {
		return
	}
	m.branchUpdates.WithLabelValues(k.Tenant, k.Repo).Inc()
}

// Gate counts a gate evaluation by result.
func (m *Metrics) Gate(result string, _ time.Duration) {
	if m == nil {
		return
	}
	m.gateEvals.WithLabelValues(result).Inc()
}

func itoa(n int) string {
	const digits = "0123456789"
	if n >= 100 && n < 1000 {
		return string([]byte{digits[n/100], digits[n/10%10], digits[n%10]})
	}
	return "other"
}

// instrumentWebhook counts POST /webhook answers and times the durable 202.
func (m *Metrics) instrumentWebhook(h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.Webhook(sw.status, time.Since(start))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
