package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
)

// Summary counts what one RunAll did.
type Summary struct {
	// Discovered is how many repositories the App's installations listed
	// (each is tracked; a deleted database is rebuilt without a webhook).
	Discovered int `json:"discovered"`
	// Repos is how many tracked repositories this pass considered
	// (suspended ones excluded).
	Repos int `json:"repos"`
	// Reconciled passes completed in full.
	Reconciled int `json:"reconciled"`
	// Skipped: lease held by someone else (409); the next pass reconciles.
	Skipped int `json:"skipped"`
	// Suspended: repositories of a suspended installation, paused.
	Suspended int `json:"suspended"`
	// Deferred: the resync waits for the next pass because the tenant's
	// rate limit ran low (the integrity part still ran).
	Deferred int `json:"deferred"`
	// Gone: tracked, but GitHub no longer lists the installation or the
	// repository (uninstalled while mergegate was down): integrity only.
	Gone int `json:"gone"`
	// Others: left to other replicas on the same database, which claimed
	// them for this period (Cron only; leasedo.ClaimReconcile).
	Others int `json:"others"`
	// Discovery says where this pass's installation discovery came from:
	// DiscoveryRan (here), DiscoveryElsewhere (another replica ran it this
	// period; its findings are used), "" (no GitHub, or it failed).
	Discovery string `json:"discovery,omitempty"`
	// Unfinished: not started before the pass's context ended.
	Unfinished int `json:"unfinished"`
	// Failed passes (errors other than the above), panics included.
	Failed int `json:"failed"`
	// Fixed and StaleLeases total results.fixed and results.staleLeases.
	Fixed       int `json:"fixed"`
	StaleLeases int `json:"staleLeases"`
	// RateLimited lists the tenants stopped early for their rate limit.
	RateLimited []string      `json:"rateLimited,omitempty"`
	Took        time.Duration `json:"took"`
}

// outcome is how one repository's pass ended.
type outcome int

const (
	outReconciled outcome = iota
	outSkipped
	outDeferred
	outUnfinished
	outFailed
	outOther // claimed by another replica for this period
)

// Where a pass's discovery came from (Summary.Discovery).
const (
	DiscoveryRan       = "ran"
	DiscoveryElsewhere = "other_replica"
)

// RunAll is one cron pass: discovery (the App's installations and their
// repositories are tracked), then reconcile and the resync for
// every tracked repository of a non-suspended installation, Concurrency at
// a time, taken round-robin over the installations (each installation's
// requests are bounded per installation by forge). A tenant whose rate
// limit falls below MinRateRemaining (or that is rate-limited) gets no more
// resyncs this pass. Per-repository errors are logged and counted; the
// error returned says how many failed, or that the context ended.
//
// Within a Cron's run (ClaimPeriod), RunAll is shared by the replicas on
// one database: discovery runs on one replica a period (the others use
// its findings), and each repository is reconciled by the replica that
// claims it for the period (the others count it in Others). Called
// otherwise, it reconciles every repository, whatever other replicas did.
func (r *Reconciler) RunAll(ctx context.Context) (Summary, error) {
	every, claimed := ClaimPeriod(ctx)
	if !claimed {
		every = -1
	}
	return r.runAll(ctx, every)
}

// runAll is RunAll claimed for every (0: the claims always win, and are
// recorded; negative: no claim).
func (r *Reconciler) runAll(ctx context.Context, every time.Duration) (Summary, error) {
	start := time.Now()
	ctx = context.WithValue(ctx, cronPassKey{}, true)
	var sum Summary
	stops := &tenantStops{stopped: map[string]bool{}}
	var disc *discovery
	if r.forge != nil {
		disc, sum.Discovery = r.discoverOnce(ctx, stops, every)
		if sum.Discovery == DiscoveryRan {
			sum.Discovered = disc.count
		}
	}
	tracked, err := r.store.Tracked(ctx)
	if err != nil {
		return sum, err
	}
	type job struct {
		key    leasedo.Key
		resync bool
	}
	var jobs []job
	for _, t := range tracked {
		if t.Suspended || disc.suspended(t.Key.Tenant) {
			sum.Suspended++
			continue
		}
		j := job{key: t.Key, resync: r.forge != nil}
		if j.resync && disc.gone(t) {
			sum.Gone++
			j.resync = false
			r.log.Warn().Str("tenant", t.Key.Tenant).Str("repo", t.Key.Repo).
				Msg("GitHub no longer lists this repository for its installation; reconciling without resync until an uninstall delivery forgets it")
		}
		jobs = append(jobs, j)
	}
	sum.Repos = len(jobs)
	jobs = interleave(jobs, func(j job) string { return j.key.Tenant })

	var mu sync.Mutex
	var firstErr error
	forEach(r, r.conc, jobs, func(j job) {
		out, ans, err := r.runOne(ctx, j.key, j.resync, stops, every)
		mu.Lock()
		defer mu.Unlock()
		sum.Fixed += len(ans.Results.Fixed)
		sum.StaleLeases += len(ans.Results.StaleLeases)
		switch out {
		case outReconciled:
			sum.Reconciled++
		case outSkipped:
			sum.Skipped++
		case outDeferred:
			sum.Deferred++
		case outUnfinished:
			sum.Unfinished++
		case outFailed:
			sum.Failed++
			if firstErr == nil {
				firstErr = err
			}
		case outOther:
			sum.Others++
		}
	})
	sum.RateLimited = stops.list()
	sum.Took = time.Since(start)

	ev := r.log.Info()
	if sum.Discovery != "" { // a key is left out rather than logged empty (docs/operations.md, Logs)
		ev = ev.Str("discovery", sum.Discovery)
	}
	if len(sum.RateLimited) > 0 {
		ev = ev.Strs("rate_limited", sum.RateLimited)
	}
	ev.Int("discovered", sum.Discovered).Int("repos", sum.Repos).Int("reconciled", sum.Reconciled).
		Int("skipped", sum.Skipped).Int("others", sum.Others).Int("suspended", sum.Suspended).Int("deferred", sum.Deferred).Int("gone", sum.Gone).
		Int("unfinished", sum.Unfinished).Int("failed", sum.Failed).Int("fixed", sum.Fixed).Int("stale_leases", sum.StaleLeases).
		Int64("took_ms", sum.Took.Milliseconds()).Msg("reconcile run")
	switch {
	case sum.Unfinished > 0:
		return sum, fmt.Errorf("reconcile run ended early (%w): %d of %d repositories left for the next pass", context.Cause(ctx), sum.Unfinished, sum.Repos)
	case sum.Failed > 0:
		return sum, fmt.Errorf("reconcile run: %d of %d repositories failed; first: %w", sum.Failed, sum.Repos, firstErr)
	}
	return sum, nil
}

// runOne reconciles one repository within RunAll. A panic is recovered and
// counted as a failure: passes run on their own goroutines, out of reach of
// the cron's recover.
//
// Claimed (every >= 0), k is claimed first: a repository another replica
// reconciled this period is left to it (outOther).
func (r *Reconciler) runOne(ctx context.Context, k leasedo.Key, resync bool, stops *tenantStops, every time.Duration) (out outcome, ans leasedo.ReconcileAnswer, err error) {
	if ctx.Err() != nil {
		return outUnfinished, ans, ctx.Err()
	}
	if every >= 0 {
		won, err := r.store.ClaimReconcile(ctx, k, r.by, every)
		switch {
		case err != nil && ctx.Err() != nil:
			return outUnfinished, ans, err
		case err != nil:
			return outFailed, ans, err
		case !won:
			return outOther, ans, nil
		}
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s: panic: %v", k, p)
			r.log.Error().Str("tenant", k.Tenant).Str("repo", k.Repo).Str("stack", string(debug.Stack())).Err(err).Msg("reconcile pass panicked")
			out = outFailed
		}
	}()
	deferred := false
	if resync {
		if stops.isStopped(k.Tenant) {
			resync, deferred = false, true
		} else if low, left := r.rateLow(k.Tenant); low {
			stops.stop(r, k.Tenant, fmt.Sprintf("%d rate-limit points left (minimum %d)", left, r.minRate))
			resync, deferred = false, true
		}
	}
	if r.beforeRepo != nil {
		r.beforeRepo(k)
	}
	ans, err = r.pass(ctx, k, resync)
	rl, limited := forge.IsRateLimited(err)
	switch {
	case leasedo.IsLocked(err):
		return outSkipped, ans, err
	case limited && rl.GraphQL:
		// The GraphQL quota is apart from the REST one the installation's
		// other repositories spend: only this one waits for it.
		return outDeferred, ans, err
	case limited || errors.Is(err, ErrRateLow):
		stops.stop(r, k.Tenant, err.Error())
		return outDeferred, ans, err
	case err != nil && ctx.Err() != nil:
		return outUnfinished, ans, err
	case err != nil:
		return outFailed, ans, err
	case deferred:
		return outDeferred, ans, nil
	}
	return outReconciled, ans, nil
}

// rateLow reports whether tenant's last known remaining rate-limit points
// are below MinRateRemaining in a window that has not reset yet.
func (r *Reconciler) rateLow(tenant string) (bool, int) {
	if r.forge == nil || r.minRate < 0 {
		return false, 0
	}
	left, reset, known := r.forge.RateRemaining(tenant)
	if !known || left >= r.minRate {
		return false, left
	}
	if !reset.IsZero() && !r.clock.Now().Before(reset) {
		return false, left // the window has reset since; the next answer says
	}
	return true, left
}

// tenantStops remembers the tenants whose resyncs stop for this pass.
type tenantStops struct {
	mu      sync.Mutex
	stopped map[string]bool
}

func (s *tenantStops) isStopped(tenant string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped[tenant]
}

// stop marks tenant stopped, logging the first time.
func (s *tenantStops) stop(r *Reconciler, tenant, why string) {
	s.mu.Lock()
	first := !s.stopped[tenant]
	s.stopped[tenant] = true
	s.mu.Unlock()
	if first {
		r.log.Warn().Str("tenant", tenant).Str("reason", why).
			Msg("rate limit low: this installation's remaining resyncs wait for the next pass")
	}
}

func (s *tenantStops) list() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for t := range s.stopped {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// forEach runs fn over items, n at a time, and waits. A panic in fn is
// logged and does not stop the others.
func forEach[T any](r *Reconciler, n int, items []T, fn func(T)) {
	ch := make(chan T)
	var wg sync.WaitGroup
	for i := 0; i < min(n, len(items)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				func() {
					defer func() {
						if p := recover(); p != nil {
							r.log.Error().Str("stack", string(debug.Stack())).Msgf("reconcile worker panicked: %v", p)
						}
					}()
					fn(it)
				}()
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
}

// interleave orders jobs round-robin over their tenants, keeping each
// tenant's own order: the Store lists repositories by tenant, and the
// workers would otherwise all work on one installation, queued on its
// request slots, while the others' sat idle.
func interleave[T any](items []T, tenant func(T) string) []T {
	var order []string
	by := map[string][]T{}
	for _, it := range items {
		t := tenant(it)
		if _, ok := by[t]; !ok {
			order = append(order, t)
		}
		by[t] = append(by[t], it)
	}
	out := make([]T, 0, len(items))
	for i := 0; len(out) < len(items); i++ {
		for _, t := range order {
			if i < len(by[t]) {
				out = append(out, by[t][i])
			}
		}
	}
	return out
}
