package forge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

func TestConditionalGetPRCostsNothingWhenUnchanged(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"automerge"}})

	first, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	used := e.gh.RateLimitUsed()
	second, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.gh.RateLimitUsed(); got != used {
		t.Errorf("rate-limit points: %d after the repeat, %d before; want no cost", got, used)
	}
	if first.HeadSHA != second.HeadSHA || !slices.Equal(first.Labels, second.Labels) || second.Number != 1 {
		t.Errorf("cached answer differs: %+v vs %+v", first, second)
	}
	calls := e.gh.Calls()
	if last := calls[len(calls)-1]; last.Status != 304 || !last.NotModified {
		t.Errorf("last call = %+v, want a 304", last)
	}
	if req, nm := e.c.Stats(); nm != 1 || req != 3 {
		t.Errorf("Stats = %d requests, %d not modified; want 3 (token, get, get), 1", req, nm)
	}
	if st := e.c.EndpointStats()["pulls.get"]; st.Requests != 2 || st.NotModified != 1 {
		t.Errorf("pulls.get stats = %+v", st)
	}

	// A change is seen, and paid for.
	e.gh.SetLabels(repo, 1, "automerge", "urgent")
	third, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(third.Labels, []string{"automerge", "urgent"}) {
		t.Errorf("labels after change = %v", third.Labels)
	}
	if got := e.gh.RateLimitUsed(); got != used+1 {
		t.Errorf("rate-limit points = %d, want %d", got, used+1)
	}
}

func TestConditionalListAndChecksCostNothingWhenUnchanged(t *testing.T) {
	e := newEnv(t, envOpts{})
	for n := 1; n <= 150; n++ {
		e.gh.AddPR(repo, fakegithub.PR{Number: n})
	}
	e.gh.SetRequired(repo, "main", []string{"ci"}, true)
	e.gh.SetCheckRun(repo, "h", "ci", "completed", "success")
	e.gh.SetStatus(repo, "h", "legacy", "success")

	read := func() ([]forge.PR, forge.Required, []forge.CheckResult) {
		t.Helper()
		prs, err := e.c.ListOpenPRs(e.ctx, tenant, repo)
		if err != nil {
			t.Fatal(err)
		}
		req, err := e.c.RequiredChecks(e.ctx, tenant, repo, "main")
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.c.CheckResults(e.ctx, tenant, repo, "h")
		if err != nil {
			t.Fatal(err)
		}
		return prs, req, res
	}
	prs1, req1, res1 := read()
	used := e.gh.RateLimitUsed()
	_, nm0 := e.c.Stats()
	prs2, req2, res2 := read()
	if got := e.gh.RateLimitUsed(); got != used {
		t.Errorf("repeat resync cost %d points, want 0", got-used)
	}
	_, nm1 := e.c.Stats()
	// 2 list pages + protection + rules + check runs + status
	if nm1-nm0 != 6 {
		t.Errorf("304s = %d, want 6", nm1-nm0)
	}
	if len(prs1) != 150 || len(prs2) != 150 || !slices.Equal(req1.Contexts, req2.Contexts) || len(res1) != len(res2) {
		t.Errorf("cached answers differ: %d/%d PRs, %v/%v, %d/%d results", len(prs1), len(prs2), req1, req2, len(res1), len(res2))
	}
}

// TestLifecycleCallBudget counts the GitHub calls of one PR's life through
// the queue (join → gate → merge) as the app is expected to make them, and
// the cost of re-evaluating an unchanged gate.
func TestLifecycleCallBudget(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRequired(repo, "main", []string{"ci"}, false)
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h", Labels: []string{"automerge"}})
	e.gh.SetCheckRun(repo, "h", "ci", "completed", "success")
	ctx := e.ctx

	// join: read the PR, put mergegate's check run on it.
	pr, err := e.c.GetPR(ctx, tenant, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.c.CreateCheckRun(ctx, tenant, repo, pr.HeadSHA, forge.CheckRun{Status: "in_progress", Title: "Queued: position 1", Summary: "Waiting for required checks."})
	if err != nil {
		t.Fatal(err)
	}
	// gate
	req, err := e.c.RequiredChecks(ctx, tenant, repo, pr.BaseRef)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.c.CheckResults(ctx, tenant, repo, pr.HeadSHA)
	if err != nil {
		t.Fatal(err)
	}
	if v := forge.EvaluateGate(req, res, nil); v.Result != forge.GateSuccess {
		t.Fatalf("gate = %+v", v)
	}
	usedBeforeRepeat := e.gh.RateLimitUsed()
	if _, err := e.c.RequiredChecks(ctx, tenant, repo, pr.BaseRef); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CheckResults(ctx, tenant, repo, pr.HeadSHA); err != nil {
		t.Fatal(err)
	}
	repeatCost := e.gh.RateLimitUsed() - usedBeforeRepeat
	// merge, and close mergegate's check run.
	if _, err := e.c.Merge(ctx, tenant, repo, 1, pr.HeadSHA, "merge"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.UpdateCheckRun(ctx, tenant, repo, id, forge.CheckRun{Conclusion: "success", Title: "Merged", Summary: "Merged by mergegate."}); err != nil {
		t.Fatal(err)
	}

	counts := e.gh.CallCounts()
	api := 0
	for route, n := range counts {
		if route != fakegithub.RouteCreateToken {
			api += n
		}
	}
	api -= 4 // the repeated gate reads (304s), reported separately
	t.Logf("lifecycle: %d API calls (+%d token), repeat gate read: 4 calls, %d rate-limit points; per route: %v",
		api, counts[fakegithub.RouteCreateToken], repeatCost, counts)
	if api > 8 {
		t.Errorf("lifecycle used %d API calls, budget 8", api)
	}
	if repeatCost != 0 {
		t.Errorf("repeat read of an unchanged gate cost %d points, want 0", repeatCost)
	}
}

// noise is n bytes of hex that S2 cannot shrink, the same for the same seed.
func noise(seed string, n int) string {
	var b strings.Builder
	for h := seed; b.Len() < n; {
		h = fakegithub.DeriveSHA(h)
		b.WriteString(h)
	}
	return b.String()[:n]
}

// addRepoWithPRs adds name with prs open PRs (even ones labelled), each
// with a body of body bytes of noise.
func addRepoWithPRs(e *env, name string, prs, body int) {
	e.gh.AddRepo(tenant, name, "main")
	for n := 1; n <= prs; n++ {
		labels := []string{"bug"}
		if n%2 == 0 {
			labels = []string{"automerge"}
		}
		e.gh.AddPR(name, fakegithub.PR{Number: n, Labels: labels, Body: noise(fmt.Sprint(name, n), body)})
	}
}

// listed lists name's open PRs (one page) and reports whether GitHub
// answered 304.
func listed(t *testing.T, e *env, name string) bool {
	t.Helper()
	_, nm := e.c.Stats()
	if _, err := e.c.ListOpenPRs(e.ctx, tenant, name); err != nil {
		t.Fatal(err)
	}
	_, nm2 := e.c.Stats()
	return nm2 > nm
}

// listingCost is what one listing of addRepoWithPRs(prs, body) counts
// against the byte bound.
func listingCost(t *testing.T, prs, body int) int64 {
	t.Helper()
	e := newEnv(t, envOpts{})
	addRepoWithPRs(e, "octo/probe", prs, body)
	listed(t, e, "octo/probe")
	n, b := e.c.CacheSize()
	if n != 1 {
		t.Fatalf("probe: %d entries cached", n)
	}
	return b
}

// Many large answers: the cache stays under its byte bound, keeps the most
// recent ones, and does not keep one too big for it.
func TestCacheByteBoundHoldsUnderLargeAnswers(t *testing.T) {
	const bound = 256 << 10 // an entry may take 16 KiB
	e := newEnv(t, envOpts{cacheBytes: bound})
	const repos = 60
	for i := 0; i < repos; i++ {
		addRepoWithPRs(e, fmt.Sprintf("octo/r%02d", i), 5, 1500)
	}
	for i := 0; i < repos; i++ {
		listed(t, e, fmt.Sprintf("octo/r%02d", i))
		if _, b := e.c.CacheSize(); b > bound {
			t.Fatalf("after %d listings the cache counts %d bytes, bound %d", i+1, b, bound)
		}
	}
	n, b := e.c.CacheSize()
	t.Logf("%d listings of 5 PRs (%d bytes each, counted): %d kept, %d bytes", repos, listingCost(t, 5, 1500), n, b)
	if n >= repos || n < 10 || b < bound*3/4 {
		t.Fatalf("cache holds %d entries, %d bytes", n, b)
	}
	for i := repos - 1; i >= repos-n; i-- {
		if !listed(t, e, fmt.Sprintf("octo/r%02d", i)) {
			t.Errorf("r%02d, one of the %d most recent, was not a 304", i, n)
		}
	}
	if listed(t, e, "octo/r00") {
		t.Error("r00, the oldest, was still cached")
	}

	// Too big: a 12-PR listing takes more than a 16th of the bound.
	addRepoWithPRs(e, "octo/huge", 12, 1500)
	n0, b0 := e.c.CacheSize()
	// Listed twice: the second would be answered from the cache had the
	// first been kept (|| would skip it).
	first, second := listed(t, e, "octo/huge"), listed(t, e, "octo/huge")
	if first || second {
		t.Error("the huge listing was cached")
	}
	if n, b := e.c.CacheSize(); n != n0 || b != b0 {
		t.Errorf("the huge listing changed the cache: %d entries, %d bytes; before %d, %d", n, b, n0, b0)
	}
}

// LRU order holds under either bound: the least recently used answer goes.
func TestCacheLRUOrderWithBothBounds(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		e := newEnv(t, envOpts{cacheEntries: 3})
		for _, r := range []string{"octo/a", "octo/b", "octo/c", "octo/d"} {
			addRepoWithPRs(e, r, 3, 100)
		}
		listed(t, e, "octo/a")
		listed(t, e, "octo/b")
		listed(t, e, "octo/c")
		if !listed(t, e, "octo/a") {
			t.Fatal("a was not a 304")
		}
		listed(t, e, "octo/d") // evicts b
		for _, r := range []string{"octo/a", "octo/c", "octo/d"} {
			if !listed(t, e, r) {
				t.Errorf("%s was not a 304", r)
			}
		}
		if listed(t, e, "octo/b") {
			t.Error("b, the least recently used, was not evicted")
		}
	})
	t.Run("bytes", func(t *testing.T) {
		cost := listingCost(t, 3, 2000)
		e := newEnv(t, envOpts{cacheBytes: cost*16 + cost/2}) // 16 listings fit
		for i := 0; i <= 16; i++ {
			addRepoWithPRs(e, fmt.Sprintf("octo/r%02d", i), 3, 2000)
		}
		for i := 0; i < 16; i++ {
			listed(t, e, fmt.Sprintf("octo/r%02d", i))
		}
		if n, _ := e.c.CacheSize(); n != 16 {
			t.Fatalf("%d entries cached, want 16", n)
		}
		if !listed(t, e, "octo/r00") {
			t.Fatal("r00 was not a 304")
		}
		listed(t, e, "octo/r16") // evicts r01
		for i := 0; i <= 16; i++ {
			if i != 1 && !listed(t, e, fmt.Sprintf("octo/r%02d", i)) {
				t.Errorf("r%02d was not a 304", i)
			}
		}
		if listed(t, e, "octo/r01") {
			t.Error("r01, the least recently used, was not evicted")
		}
	})
}

// A rebuild reads every labelled PR's issue events once: they must not
// evict the PR listings the next pass revalidates. Events read again (a PR
// bounced at its head, still eligible, is looked at on every pass) are
// kept and answer 304.
func TestIssueEventsDoNotEvictListings(t *testing.T) {
	cost := listingCost(t, 20, 0)
	for _, c := range []struct {
		name string
		o    envOpts
	}{
		{"entries", envOpts{cacheEntries: 12}},               // 10 listings + 2
		{"bytes", envOpts{cacheBytes: 16*cost + 16*cost/10}}, // 10 listings + some events
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.o)
			const repos, prs = 10, 20
			for i := 0; i < repos; i++ {
				addRepoWithPRs(e, fmt.Sprintf("octo/e%02d", i), prs, 0)
			}
			for i := 0; i < repos; i++ {
				listed(t, e, fmt.Sprintf("octo/e%02d", i))
			}
			for i := 0; i < repos; i++ {
				for n := 1; n <= prs; n++ {
					if _, err := e.c.TriggerTimes(e.ctx, tenant, fmt.Sprintf("octo/e%02d", i), n, "automerge"); err != nil {
						t.Fatal(err)
					}
				}
			}
			entries, bytes := e.c.CacheSize()
			t.Logf("after %d listings and %d issue-event reads: %d entries, %d bytes", repos, repos*prs, entries, bytes)
			for i := 0; i < repos; i++ {
				if !listed(t, e, fmt.Sprintf("octo/e%02d", i)) {
					t.Errorf("e%02d's listing was evicted by issue events", i)
				}
			}
			// A PR looked at on every pass: its events are kept once asked
			// for twice.
			events := func() bool {
				t.Helper()
				_, nm := e.c.Stats()
				if _, err := e.c.TriggerTimes(e.ctx, tenant, "octo/e00", 2, "automerge"); err != nil {
					t.Fatal(err)
				}
				_, nm2 := e.c.Stats()
				return nm2 > nm
			}
			events()
			if !events() {
				t.Error("events read twice in a row: the second was not a 304")
			}
			for i := 0; i < repos; i++ {
				listed(t, e, fmt.Sprintf("octo/e%02d", i))
			}
			if !events() {
				t.Error("promoted events were evicted")
			}
			if st := e.c.EndpointStats()["pulls.list"]; st.NotModified != 2*repos {
				t.Errorf("pulls.list: %d 304s, want %d", st.NotModified, 2*repos)
			}
		})
	}
}
