package reconcile

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The cron's pass at scale: 1,000 repositories × 20 open pull requests
// (half labelled) over 10 installations, against the fake GitHub with
// 50 ms of latency on every request, must finish inside the five-minute
// period: first on an empty database (every queue rebuilt from GitHub,
// within the cron's 4 m deadline), then unchanged (every listing a 304,
// under a minute). Normal runs do 20 repositories; MERGEGATE_LONG_TESTS=1
// runs the 1,000.
//
// The time bounds below are the requirement (the deadline, a minute), far
// above what a run takes, so that a loaded CI machine under -race does not
// flake; the per-installation bound (forge's) is asserted exactly.
func TestRunAllAtScale(t *testing.T) {
	tenants, perTenant := 10, 2
	if os.Getenv("MERGEGATE_LONG_TESTS") == "1" {
		perTenant = 100
	}
	const prs, latency = 20, 50 * time.Millisecond
	e := newEnv(t)
	repos := 0
	for ti := 0; ti < tenants; ti++ {
		tn := fmt.Sprintf("%d", 500+ti)
		for i := 0; i < perTenant; i++ {
			repo := fmt.Sprintf("org%s/repo-%03d", tn, i)
			e.gh.AddRepo(tn, repo, "main")
			for n := 1; n <= prs; n++ {
				labels := []string{"bug"}
				if n%2 == 0 {
					labels = []string{"automerge"}
				}
				e.gh.AddPR(repo, fakegithub.PR{Number: n, Labels: labels})
			}
			repos++
		}
	}
	inflight := e.countInFlight()
	e.gh.SetLatency(latency)
	e.clock.Advance(5 * time.Minute)

	for pass, want := range []int{repos * prs / 2, 0} {
		start := time.Now()
		// The clocks (mergegate's and the fake's, one) move with real
		// time during the pass, as GitHub's windows do: its limits of 900
		// points a minute per endpoint and mergegate's write budget are
		// per minute of real time, not per pass.
		stop := make(chan struct{})
		ticking := make(chan struct{})
		go func() {
			defer close(ticking)
			last := time.Now()
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				now := time.Now()
				e.clock.Advance(now.Sub(last))
				last = now
			}
		}()
		sum := e.runAll()
		close(stop)
		<-ticking
		took := time.Since(start)
		total, notModified, routes := callSummary(e.gh.Calls())
		t.Logf("pass %d: %d repositories (%d PRs each, %s per request), %d fixed, took %s (cron period 5m0s, deadline %s); %d requests (%d 304):%s",
			pass+1, sum.Reconciled, prs, latency, sum.Fixed, took.Round(time.Millisecond), DefaultDeadline, total, notModified, routes)
		if sum.Reconciled != repos || sum.Fixed != want || sum.Failed != 0 || sum.Deferred != 0 {
			t.Fatalf("pass %d = %+v, want %d reconciled, %d fixed", pass+1, sum, repos, want)
		}
		if n := e.gh.SecondaryLimited(""); n != 0 {
			t.Errorf("pass %d: GitHub answered %d requests with a secondary rate limit", pass+1, n)
		}
		// The rebuild (11 requests per repository, latency-bound) must
		// fit the cron's own deadline; an unchanged pass (one 304 per
		// repository) well inside the period.
		limit := DefaultDeadline
		if pass == 1 {
			limit = time.Minute
		}
		if took > limit {
			t.Errorf("pass %d took %s, want under %s", pass+1, took, limit)
		}
		e.clock.Advance(5 * time.Minute)
		e.gh.ResetCalls()
	}
	perOwner, total := inflight.peaks()
	t.Logf("most requests in flight: %v per installation, %d in all", perOwner, total)
	for owner, n := range perOwner {
		if n > forge.DefaultInstallationConcurrency {
			t.Errorf("%s had %d requests in flight, want at most %d", owner, n, forge.DefaultInstallationConcurrency)
		}
	}
}
