package reconcile

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// inFlight is a transport below forge that records the most requests in
// flight at once, per repository owner (the tests name owners after their
// installation, "org<tenant>") and in all.
type inFlight struct {
	next http.RoundTripper

	mu       sync.Mutex
	now      map[string]int
	maxOwner map[string]int
	total    int
	maxTotal int
}

func (f *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	owner := ""
	if _, rest, ok := strings.Cut(req.URL.Path, "/repos/"); ok {
		owner, _, _ = strings.Cut(rest, "/")
	}
	f.mu.Lock()
	f.total++
	f.maxTotal = max(f.maxTotal, f.total)
	if owner != "" {
		f.now[owner]++
		f.maxOwner[owner] = max(f.maxOwner[owner], f.now[owner])
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.total--
		if owner != "" {
			f.now[owner]--
		}
		f.mu.Unlock()
	}()
	return f.next.RoundTrip(req)
}

// peaks returns the most requests in flight at once for any one owner, and
// in all.
func (f *inFlight) peaks() (perOwner map[string]int, total int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	perOwner = map[string]int{}
	for k, v := range f.maxOwner {
		perOwner[k] = v
	}
	return perOwner, f.maxTotal
}

// countInFlight replaces e's forge client by one whose requests go through
// an inFlight counter.
func (e *env) countInFlight() *inFlight {
	e.t.Helper()
	f := &inFlight{next: http.DefaultTransport, now: map[string]int{}, maxOwner: map[string]int{}}
	fc := testkit.Forge(e.t, e.gh, forge.Config{Clock: e.clock.Now, Transport: f})
	e.fc, e.cfg.Forge = fc, fc
	e.newReconciler()
	return f
}

// addRepos adds n repositories of tenant, owner "org<tenant>", each with
// prs open pull requests, every other one labelled.
func (e *env) addRepos(tenant string, n, prs int) []string {
	var repos []string
	for i := 0; i < n; i++ {
		repo := fmt.Sprintf("org%s/repo-%03d", tenant, i)
		e.gh.AddRepo(tenant, repo, "main")
		for pr := 1; pr <= prs; pr++ {
			labels := []string{"bug"}
			if pr%2 == 0 {
				labels = []string{"automerge"}
			}
			e.gh.AddPR(repo, fakegithub.PR{Number: pr, Labels: labels})
		}
		repos = append(repos, repo)
	}
	return repos
}

// The rebuild's concurrency is bounded per installation: however many
// repositories run at once and however many issue-event reads one
// repository has, no installation has more than forge.DefaultInstallationConcurrency
// requests in flight, and every PR's events are read once, as when they
// were read one after the other. Only upper bounds are asserted: how much
// parallelism a loaded machine reaches is logged.
func TestRequestsBoundedPerInstallation(t *testing.T) {
	e := newEnv(t)
	f := e.countInFlight()
	// Uneven installations, listed by tenant: without interleaving every
	// worker would start on the first one.
	sizes := map[string]int{"301": 12, "302": 4, "303": 4}
	labelled := 0
	for _, tn := range []string{"301", "302", "303"} {
		e.addRepos(tn, sizes[tn], 10)
		labelled += sizes[tn] * 5
	}
	e.gh.SetLatency(5 * time.Millisecond)
	e.clock.Advance(5 * time.Minute)

	sum := e.runAll()
	if sum.Reconciled != 20 || sum.Fixed != labelled || sum.Failed+sum.Deferred != 0 {
		t.Fatalf("summary = %+v, want 20 reconciled, %d joined", sum, labelled)
	}
	if n := e.gh.CallCount(fakegithub.RouteIssueEvents); n != labelled {
		t.Errorf("%d issue-event reads, want %d (one per labelled PR)", n, labelled)
	}
	perOwner, total := f.peaks()
	t.Logf("most requests in flight: %v per installation, %d in all", perOwner, total)
	for owner, n := range perOwner {
		if n > forge.DefaultInstallationConcurrency {
			t.Errorf("%s had %d requests in flight, want at most %d", owner, n, forge.DefaultInstallationConcurrency)
		}
	}
	if total > DefaultConcurrency*forge.DefaultInstallationConcurrency {
		t.Errorf("%d requests in flight in all, want at most %d", total, DefaultConcurrency*forge.DefaultInstallationConcurrency)
	}
	// Each rebuilt queue is in label order, whatever order the reads ended in.
	for _, tn := range []string{"301", "302", "303"} {
		for i := 0; i < sizes[tn]; i++ {
			repo := fmt.Sprintf("org%s/repo-%03d", tn, i)
			items, err := e.store.Items(e.ctx, leasedo.Key{Tenant: tn, Repo: repo})
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, it := range items {
				got = append(got, it.PRNumber)
			}
			if want := []int{2, 4, 6, 8, 10}; !slices.Equal(got, want) {
				t.Errorf("%s queue = %v, want %v", repo, got, want)
			}
		}
	}
}

// The rate-limit budget holds with the reads of one repository in flight
// together: below MinRateRemaining no new request starts, and those in
// flight (at most forge.DefaultInstallationConcurrency) are all that can overshoot.
func TestRateLimitLowWithConcurrentReads(t *testing.T) {
	e := newEnv(t)
	e.clock.Advance(-2 * time.Hour) // see TestRateLimitLowStopsEarly
	e.addRepos(tenant, 3, 60)       // 30 labelled PRs each
	e.gh.SetLatency(2 * time.Millisecond)
	// 130 points: the repository listing, the PR listings and some 25
	// issue-event reads fit above the minimum of 100.
	e.gh.SetRateLimit(tenant, 5000, 130)

	sum, err := e.r.RunAll(e.ctx)
	if err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	left := e.gh.RateLimitRemaining(tenant)
	t.Logf("low budget: %+v, %d points left", sum, left)
	if sum.Deferred == 0 || len(sum.RateLimited) != 1 || sum.RateLimited[0] != tenant {
		t.Fatalf("summary %+v: want an early stop for tenant %s", sum, tenant)
	}
	// At most the requests in flight overshoot; the margin allows for
	// answers that come back, and are observed, out of order.
	if min := DefaultMinRateRemaining - 2*forge.DefaultInstallationConcurrency; left < min {
		t.Errorf("%d points left after stopping, want at least %d", left, min)
	}
	// Joins read before the stop were applied, in label order.
	for _, repo := range []string{"org101/repo-000", "org101/repo-001", "org101/repo-002"} {
		got := e.prs(repo)
		if !slices.IsSorted(got) {
			t.Errorf("%s queue = %v, want label order", repo, got)
		}
	}
}

func TestInterleave(t *testing.T) {
	in := []string{"a1", "a2", "a3", "a4", "b1", "c1", "c2"}
	got := interleave(in, func(s string) string { return s[:1] })
	if want := []string{"a1", "b1", "c1", "a2", "c2", "a3", "a4"}; !slices.Equal(got, want) {
		t.Errorf("interleave = %v, want %v", got, want)
	}
	if got := interleave([]string(nil), func(s string) string { return s }); len(got) != 0 {
		t.Errorf("interleave(nil) = %v", got)
	}
}
