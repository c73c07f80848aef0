package app

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mergegate/mergegate/leasedo"
)

// scrapeTimeout bounds the database reads of one scrape.
const scrapeTimeout = 5 * time.Second

var (
	descQueueDepth = prometheus.NewDesc("mergegate_queue_depth",
		"Entries in the merge queue (bounced ones included).", []string{"tenant", "repo"}, nil)
	descOldest = prometheus.NewDesc("mergegate_queue_oldest_entry_age_seconds",
		"Age of the oldest entry in the merge queue (0 when empty).", []string{"tenant", "repo"}, nil)
	descLeaseAge = prometheus.NewDesc("mergegate_lease_age_seconds",
		"Age of the repository's lease while one is held (0 when free); a stale lease keeps its age until the cron force-releases it.", []string{"tenant", "repo"}, nil)
	descLeaseHeld = prometheus.NewDesc("mergegate_lease_held",
		"1 while the repository's lease is held (stale included), else 0.", []string{"tenant", "repo"}, nil)
	descTracked = prometheus.NewDesc("mergegate_tracked_repositories",
		"Repositories mergegate keeps a queue for.", nil, nil)
	descUnapplied = prometheus.NewDesc("mergegate_deliveries_unapplied",
		"Deliveries stored but not applied: pending (to do) or failed (given up on, kept for the operator).", []string{"state"}, nil)
	descRate = prometheus.NewDesc("mergegate_github_rate_limit_remaining",
		"GitHub REST rate-limit points left for the installation, from the last answer's headers.", []string{"tenant"}, nil)
	descRateReset = prometheus.NewDesc("mergegate_github_rate_limit_reset_timestamp_seconds",
		"When the installation's rate-limit window resets.", []string{"tenant"}, nil)
	descWaited = prometheus.NewDesc("mergegate_github_requests_waited_total",
		"Requests to GitHub that waited for one of the installation's request slots (at most 4 in flight per installation).", []string{"tenant"}, nil)
	descWait = prometheus.NewDesc("mergegate_github_request_wait_seconds_total",
		"Time requests to GitHub spent waiting for one of the installation's request slots, in all.", []string{"tenant"}, nil)
	descWrites = prometheus.NewDesc("mergegate_github_writes_total",
		"Content-generating requests sent to GitHub (POST, PATCH, PUT, DELETE, GraphQL mutations), by class: land, unblock, tell, cosmetic.", []string{"class"}, nil)
	descWriteBudget = prometheus.NewDesc("mergegate_github_write_budget_remaining",
		"Writes the installation may still send in the window (minute or hour) under this replica's write budget (--writes-per-minute, --writes-per-hour).", []string{"tenant", "window"}, nil)
	descWritesHeld = prometheus.NewDesc("mergegate_github_writes_held",
		"1 while the write budget holds back some of the installation's writes (check-run titles first), else 0.", []string{"tenant"}, nil)
	descOpRequests = prometheus.NewDesc("mergegate_github_requests_total",
		"Requests to GitHub by operation (pulls.get, checks.list-for-ref, ...), conditional ones included.", []string{"operation"}, nil)
	descOpNotModified = prometheus.NewDesc("mergegate_github_not_modified_total",
		"Conditional GETs GitHub answered 304 Not Modified (free of rate-limit cost), by operation.", []string{"operation"}, nil)
	descConfigured = prometheus.NewDesc("mergegate_github_app_configured",
		"1 when mergegate has GitHub App credentials (gates and merges run), 0 while it waits for the set-up.", nil, nil)
	descCronDuration = prometheus.NewDesc("mergegate_reconcile_last_duration_seconds",
		"How long the last reconcile cron pass took, successful or not.", nil, nil)
	descCronSuccess = prometheus.NewDesc("mergegate_reconcile_last_success_timestamp_seconds",
		"When the last reconcile cron pass that ended without error ended (0: none yet).", nil, nil)
	descCronRuns = prometheus.NewDesc("mergegate_reconcile_runs_total",
		"Reconcile cron passes ended.", nil, nil)
	descReplicas = prometheus.NewDesc("mergegate_replicas",
		"Replicas of mergegate alive on this database (a heartbeat within 30 s), this one included, as of its last heartbeat; each installation's GitHub request bound is shared among them.", nil, nil)
	descDBBytes = prometheus.NewDesc("mergegate_db_bytes",
		"Bytes the SQLite database takes on disk: its file and its WAL.", nil, nil)
)

// appCollector reads, at scrape time, what lives in the database (queues,
// leases, deliveries) and in the current GitHub client and cron, which the
// set-up flow may replace.
type appCollector struct{ a *App }

// attach registers the App's scrape-time series.
func (m *Metrics) attach(a *App) {
	if m == nil {
		return
	}
	m.Registry.MustRegister(appCollector{a})
}

func (c appCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueDepth, descOldest, descLeaseAge, descLeaseHeld, descTracked,
		descUnapplied, descRate, descRateReset, descWaited, descWait, descOpRequests, descOpNotModified, descConfigured,
		descCronDuration, descCronSuccess, descCronRuns, descDBBytes, descReplicas, descWrites, descWriteBudget, descWritesHeld} {
		ch <- d
	}
}

func (c appCollector) Collect(ch chan<- prometheus.Metric) {
	a := c.a
	fc, _, cron := a.current()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	configured := 0.0
	if fc != nil {
		configured = 1
	}
	gauge(descConfigured, configured)
	if n := a.cluster.replicas(); n > 0 {
		gauge(descReplicas, float64(n))
	}
	if n, err := a.Store.DB().Size(); err == nil {
		gauge(descDBBytes, float64(n))
	} else {
		a.log.Warn().Err(err).Msg("metrics: database size")
	}
	if cron != nil {
		gauge(descCronDuration, cron.LastDuration().Seconds())
		last := 0.0
		if t := cron.LastSuccess(); !t.IsZero() {
			last = float64(t.UnixNano()) / 1e9
		}
		gauge(descCronSuccess, last)
		counter(descCronRuns, float64(cron.Runs()))
	}
	if fc != nil {
		for op, st := range fc.EndpointStats() {
			counter(descOpRequests, float64(st.Requests), op)
			counter(descOpNotModified, float64(st.NotModified), op)
		}
		for cl, n := range fc.WritesSent() {
			counter(descWrites, float64(n), cl.String())
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	s := a.Store
	if counts, err := s.DeliveryCounts(ctx); err == nil {
		gauge(descUnapplied, float64(counts[leasedo.DeliveryPending]), leasedo.DeliveryPending)
		gauge(descUnapplied, float64(counts[leasedo.DeliveryFailed]), leasedo.DeliveryFailed)
	} else {
		a.log.Warn().Err(err).Msg("metrics: count deliveries")
	}
	repos, err := s.Gauges(ctx)
	if err != nil {
		a.log.Warn().Err(err).Msg("metrics: read repository gauges")
		return
	}
	gauge(descTracked, float64(len(repos)))
	now := a.cfg.Clock.Now()
	tenants := map[string]bool{}
	for _, g := range repos {
		tenants[g.Tenant] = true
		gauge(descQueueDepth, float64(g.QueueDepth), g.Tenant, g.Repo)
		oldest := 0.0
		if g.QueueDepth > 0 {
			oldest = max(now.Sub(g.OldestQueuedAt).Seconds(), 0)
		}
		gauge(descOldest, oldest, g.Tenant, g.Repo)
		held, age := 0.0, 0.0
		if d, ok := leaseAge(g.Lease, s.TTL()); ok {
			held, age = 1, d.Seconds()
		}
		gauge(descLeaseHeld, held, g.Tenant, g.Repo)
		gauge(descLeaseAge, age, g.Tenant, g.Repo)
	}
	if fc != nil {
		for tenant := range tenants {
			if rem, reset, known := fc.RateRemaining(tenant); known {
				gauge(descRate, float64(rem), tenant)
				gauge(descRateReset, float64(reset.Unix()), tenant)
			}
			waited, wait := fc.Waits(tenant)
			counter(descWaited, float64(waited), tenant)
			counter(descWait, wait.Seconds(), tenant)
			if b, ok := fc.WriteBudget(tenant); ok {
				if b.PerMinute > 0 {
					gauge(descWriteBudget, float64(max(b.PerMinute-b.LastMinute, 0)), tenant, "minute")
				}
				if b.PerHour > 0 {
					gauge(descWriteBudget, float64(max(b.PerHour-b.LastHour, 0)), tenant, "hour")
				}
				held := 0.0
				if !b.Held.IsZero() {
					held = 1
				}
				gauge(descWritesHeld, held, tenant)
			}
		}
	}
}
