package reconcile

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

// callSummary counts the fake's calls by route and status class.
func callSummary(calls []fakegithub.Call) (total, notModified int, byRoute string) {
	m := map[string]int{}
	for _, c := range calls {
		total++
		if c.NotModified {
			notModified++
		}
		m[fmt.Sprintf("%s %d", c.Route, c.Status)]++
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %4d  %s", m[k], k)
	}
	return total, notModified, b.String()
}

// API cost: 200 repositories (4 installations of 50), each with 2 open PRs,
// one eligible; half already queued. The first pass joins the other half
// and reads every entry's checks; the second sees mergegate's own check
// runs on them (new data); a pass over the repositories once settled costs
// 0 rate-limit points: every request is a 304.
func TestAPICostUnchangedRepositories(t *testing.T) {
	e := newEnv(t)
	tenants := []string{"101", "102", "103", "104"}
	n := 0
	for _, tn := range tenants {
		for i := 0; i < 50; i++ {
			repo := fmt.Sprintf("org%s/repo-%03d", tn, i)
			e.gh.AddRepo(tn, repo, "main")
			e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
			e.gh.AddPR(repo, fakegithub.PR{Number: 2, Labels: []string{"bug"}})
			if n%2 == 0 {
				if _, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "pull_request", Tenant: tn, Repo: repo, Action: "labeled", Op: leasedo.OpJoin,
					PRNumber: 1, Details: &leasedo.Details{Sha: fakegithub.DeriveSHA(repo, "pr", "1"), Base: "main"}}, "worker"); err != nil {
					t.Fatal(err)
				}
			}
			n++
		}
	}
	e.clock.Advance(5 * time.Minute)

	first := e.runAll()
	usedFirst := e.gh.RateLimitUsed()
	calls1 := e.gh.Calls()
	total1, nm1, routes1 := callSummary(calls1)
	if first.Discovered != 200 || first.Reconciled != 200 || first.Fixed != 100 {
		t.Fatalf("first pass = %+v, want 200 discovered and reconciled, 100 joined", first)
	}
	t.Logf("first pass: %d requests (%d 304), %d rate-limit points:%s", total1, nm1, usedFirst, routes1)

	// Settles: the check runs the write budget held back in the first
	// pass (50 per installation, 45 a minute for runs created) are
	// created, and the runs mergegate wrote are read.
	for range 2 {
		e.clock.Advance(5 * time.Minute)
		e.runAll()
	}
	usedFirst = e.gh.RateLimitUsed()
	e.gh.ResetCalls()
	e.clock.Advance(5 * time.Minute)
	second := e.runAll()
	usedSecond := e.gh.RateLimitUsed() - usedFirst
	calls2 := e.gh.Calls()
	total2, nm2, routes2 := callSummary(calls2)
	t.Logf("second pass: %d requests (%d 304), %d rate-limit points:%s", total2, nm2, usedSecond, routes2)
	if second.Reconciled != 200 || second.Fixed != 0 {
		t.Errorf("second pass = %+v, want 200 reconciled, nothing fixed", second)
	}
	if usedSecond != 0 {
		t.Errorf("second pass used %d rate-limit points, want 0", usedSecond)
	}
	for _, c := range calls2 {
		if c.Method != "GET" || !c.NotModified {
			t.Errorf("second pass: %s %s answered %d, want a 304", c.Method, c.Path, c.Status)
		}
	}
	// Per repository: its listing, and for its waiting entry the base's
	// rulesets, the check runs, the commit statuses and the check suites
	// (no required checks); then one installation listing, one repository
	// listing per installation.
	if want := 200*5 + 1 + len(tenants); total2 != want {
		t.Errorf("second pass sent %d requests, want %d", total2, want)
	}
	for _, tn := range tenants {
		// Each joined entry's first reading and its check run, and each
		// repository's policy file (a 404 without an ETag, read once an
		// hour): 11 points or less.
		if left, _, _ := e.fc.RateRemaining(tn); left < 5000-50*11 {
			t.Errorf("tenant %s: %d points left", tn, left)
		}
	}
}

// Rate limit low: below MinRateRemaining a tenant's remaining resyncs wait
// for the next pass (its leases are still checked); after the window resets
// the next pass completes. Other tenants are not held back.
func TestRateLimitLowStopsEarly(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Concurrency = 1 })
	// Two hours back, so that the window can reset (one hour on) while
	// ghinstallation, on the wall clock, keeps minting valid tokens.
	e.clock.Advance(-2 * time.Hour)
	for i := 0; i < 10; i++ {
		repo := fmt.Sprintf("octo/r%d", i)
		e.gh.AddRepo(tenant, repo, "main")
		e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	}
	e.gh.AddRepo("202", "other/r", "main")
	e.gh.AddPR("other/r", fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	// 108 points left: the repository listing (1) and two repositories
	// (the policy file, a 404, the list and the issue events: 3 each, and
	// the organisation's policy file once) fit above the minimum of 100.
	e.gh.SetRateLimit(tenant, 5000, 108)

	sum, err := e.r.RunAll(e.ctx)
	if err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	queued := 0
	for i := 0; i < 10; i++ {
		queued += len(e.prs(fmt.Sprintf("octo/r%d", i)))
	}
	if sum.Deferred == 0 || queued >= 10 || len(sum.RateLimited) != 1 || sum.RateLimited[0] != tenant {
		t.Fatalf("summary %+v with %d of 10 queued: want an early stop for tenant %s", sum, queued, tenant)
	}
	if left := e.gh.RateLimitRemaining(tenant); left < 95 {
		t.Errorf("%d points left after stopping, want the budget kept near 100", left)
	}
	if q, _ := e.store.Items(e.ctx, leasedo.Key{Tenant: "202", Repo: "other/r"}); len(q) != 1 {
		t.Errorf("the other tenant was held back")
	}
	if !strings.Contains(e.logs.String(), "rate limit low") {
		t.Errorf("stop not logged")
	}
	t.Logf("low budget: %+v, %d of 10 queued", sum, queued)

	// The window resets (for the fake and for forge's last known reset).
	e.clock.Advance(61 * time.Minute)
	sum = e.runAll()
	queued = 0
	for i := 0; i < 10; i++ {
		queued += len(e.prs(fmt.Sprintf("octo/r%d", i)))
	}
	if sum.Deferred != 0 || queued != 10 {
		t.Errorf("after reset: %+v, %d of 10 queued", sum, queued)
	}
}

// A *forge.RateLimitError (here a secondary limit with retry-after) stops
// that tenant for the pass; after retry-after the next pass completes.
func TestRateLimitErrorStopsTenant(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Concurrency = 1 })
	for i := 0; i < 3; i++ {
		repo := fmt.Sprintf("octo/r%d", i)
		e.gh.AddRepo(tenant, repo, "main")
		e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	}
	e.gh.Fail(fakegithub.RouteListPulls, 1, fakegithub.FaultRetryAfter(403, 60))
	sum, err := e.r.RunAll(e.ctx)
	if err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	if sum.Deferred != 3 || sum.Failed != 0 || len(sum.RateLimited) != 1 {
		t.Fatalf("summary = %+v, want all 3 deferred", sum)
	}
	if n := e.gh.CallCount(fakegithub.RouteListPulls); n != 1 {
		t.Errorf("%d listings sent while rate-limited, want 1", n)
	}
	if _, limited := forge.IsRateLimited(fmt.Errorf("x: %w", &forge.RateLimitError{})); !limited {
		t.Fatal("IsRateLimited does not unwrap")
	}
	e.clock.Advance(61 * time.Second)
	if sum = e.runAll(); sum.Reconciled != 3 || sum.Fixed != 3 {
		t.Errorf("after retry-after: %+v, want 3 reconciled and joined", sum)
	}
}

// An unchanged cron pass reads again each base's head and a sixth of the
// entries behind it, in turn: every entry at least once in six passes
// (half an hour at the 5-minute period), not all of them every pass.
func TestCronPassReadsTheHeadAndATurnOfTheRest(t *testing.T) {
	e := newEnv(t)
	const repo, n = "octo/long", 12
	e.gh.AddRepo(tenant, repo, "main")
	for i := 1; i <= n; i++ {
		e.gh.AddPR(repo, fakegithub.PR{Number: i, Labels: []string{"automerge"}})
	}
	e.clock.Advance(5 * time.Minute)
	e.runAll() // rebuilds the queue: every entry read once
	read := map[string]int{}
	var perPass []int
	for pass := 0; pass < recheckSpread; pass++ {
		e.clock.Advance(5 * time.Minute)
		e.gh.ResetCalls()
		e.runAll()
		count := 0
		for _, c := range e.gh.Calls() {
			if c.Route == fakegithub.RouteListCheckRuns {
				read[c.Path]++
				count++
			}
		}
		perPass = append(perPass, count)
	}
	if len(read) != n {
		t.Errorf("%d of %d entries read again in %d passes: %v", len(read), n, recheckSpread, read)
	}
	for i, c := range perPass {
		if c > 1+(n-1)/recheckSpread+1 {
			t.Errorf("pass %d read %d entries' checks, want the head and about a sixth of the other %d (%v)", i+1, c, n-1, perPass)
		}
	}
}

// The GraphQL quota is apart from the REST one: spent, it defers the pass
// of the repository that needs it (a base that uses GitHub's merge queue,
// an entry whose checks passed), not the installation's other ones.
func TestGraphQLRateLimitDefersOnlyItsRepository(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Concurrency = 1 })
	for i := 0; i < 3; i++ {
		repo := fmt.Sprintf("octo/r%d", i)
		e.gh.AddRepo(tenant, repo, "main")
		pr := e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
		if i == 0 {
			e.gh.SetRulesetRequired(repo, "main", []string{"ci"}, false)
			e.gh.SetMergeQueue(repo, "main", true)
			e.gh.SetCheckRun(repo, pr.HeadSHA, "ci", "completed", "success")
		}
	}
	e.gh.SetGraphQLRateLimit(tenant, fakegithub.GraphQLPointsPerHour, 0)
	sum, err := e.r.RunAll(e.ctx)
	if err != nil {
		t.Fatalf("RunAll: %v", err)
	}
	if sum.Deferred != 1 || sum.Reconciled != 2 || sum.Failed != 0 {
		t.Fatalf("summary = %+v, want the merge queue's repository deferred and the other two reconciled", sum)
	}
	for i := 1; i < 3; i++ {
		if q := e.prs(fmt.Sprintf("octo/r%d", i)); len(q) != 1 {
			t.Errorf("octo/r%d: %d queued, want its pull request", i, len(q))
		}
	}
	if n := e.gh.CallCount(fakegithub.RouteGraphQL); n != 1 {
		t.Errorf("%d GraphQL requests with the quota spent, want 1", n)
	}
}
