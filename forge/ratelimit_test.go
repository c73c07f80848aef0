package forge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// rateLimited asserts err is a RateLimitError and returns it.
func rateLimited(t *testing.T, err error) *forge.RateLimitError {
	t.Helper()
	rl, ok := forge.IsRateLimited(err)
	if !ok {
		t.Fatalf("err = %v, want a RateLimitError", err)
	}
	return rl
}

func TestRateLimit429RetryAfter(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h"})
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultRetryAfter(429, 90))

	_, err := e.c.Merge(e.ctx, tenant, repo, 1, "h", "merge")
	rl := rateLimited(t, err)
	if !rl.Secondary || rl.Status != 429 || !rl.RetryAt.Equal(e.clock.Now().Add(90*time.Second)) {
		t.Errorf("RateLimitError = %+v, want secondary, retry at now+90s", rl)
	}

	// Before RetryAt nothing is sent, for any endpoint of the installation.
	e.clock.Advance(89 * time.Second)
	_, err2 := e.c.Merge(e.ctx, tenant, repo, 1, "h", "merge")
	_, err3 := e.c.GetPR(e.ctx, tenant, repo, 1)
	for _, err := range []error{err2, err3} {
		var got *forge.RateLimitError
		if !errors.As(err, &got) || got != rl {
			t.Errorf("during back-off: err = %v, want the same RateLimitError", err)
		}
	}
	if n := e.gh.CallCount(fakegithub.RouteMerge); n != 1 {
		t.Errorf("merge requests = %d, want 1 (no hammering)", n)
	}
	if n := e.gh.CallCount(fakegithub.RouteGetPull); n != 0 {
		t.Errorf("get requests = %d, want 0", n)
	}

	e.clock.Advance(time.Second)
	if _, err := e.c.Merge(e.ctx, tenant, repo, 1, "h", "merge"); err != nil {
		t.Fatalf("after RetryAt: %v", err)
	}
	if len(e.gh.Merges()) != 1 {
		t.Error("merge lost after the rate limit")
	}
}

func TestRateLimit403RetryAfter(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultRetryAfter(403, 30))
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	rl := rateLimited(t, err)
	if !rl.Secondary || rl.Status != 403 || !rl.RetryAt.Equal(e.clock.Now().Add(30*time.Second)) {
		t.Errorf("RateLimitError = %+v", rl)
	}
}

func TestRateLimitQuotaExhaustedWaitsForReset(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	reset := e.clock.Now().Add(10 * time.Minute)
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultQuotaExhausted(reset))

	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	rl := rateLimited(t, err)
	if rl.Secondary || rl.Status != 403 || !rl.RetryAt.Equal(reset) {
		t.Errorf("RateLimitError = %+v, want primary, retry at %v", rl, reset)
	}
	e.clock.Advance(9 * time.Minute)
	if _, err := e.c.ListOpenPRs(e.ctx, tenant, repo); rateLimited(t, err) != rl {
		t.Error("not the same RateLimitError")
	}
	if n := len(e.gh.Calls()); n != 2 { // token + the limited GET
		t.Errorf("requests = %d, want 2: nothing sent before the reset", n)
	}
	e.clock.Advance(time.Minute)
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatalf("after reset: %v", err)
	}
}

func TestRateLimitLastPointSpentBlocksUntilReset(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.SetRateLimit(tenant, 5000, 1)

	// The last point: the answer is fine but says remaining 0.
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	rl := rateLimited(t, err)
	if !rl.RetryAt.Equal(e.clock.Now().Add(time.Hour)) {
		t.Errorf("RetryAt = %v, want the fake's window reset", rl.RetryAt)
	}
	if n := e.gh.CallCount(fakegithub.RouteGetPull); n != 1 {
		t.Errorf("get requests = %d, want 1", n)
	}
	if rem, _, _ := e.c.RateRemaining(tenant); rem != 0 {
		t.Errorf("RateRemaining = %d, want 0", rem)
	}
}

func TestSecondaryLimitWithoutRetryAfterBacksOffExponentially(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.Fail(fakegithub.RouteGetPull, 5, fakegithub.FaultSecondary(403))

	var backoffs []time.Duration
	for i := 0; i < 5; i++ {
		_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
		rl := rateLimited(t, err)
		if !rl.Secondary {
			t.Fatalf("attempt %d: %+v, want secondary", i, rl)
		}
		d := rl.RetryAt.Sub(e.clock.Now())
		backoffs = append(backoffs, d)
		e.clock.Advance(d)
	}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 15 * time.Minute}
	for i := range want {
		if backoffs[i] != want[i] {
			t.Errorf("back-offs = %v, want %v", backoffs, want)
			break
		}
	}
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	// A success resets the sequence.
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultSecondary(429))
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if d := rateLimited(t, err).RetryAt.Sub(e.clock.Now()); d != time.Minute {
		t.Errorf("back-off after a success = %v, want 1m", d)
	}
}

// Past the content-generating requests' limits GitHub words its 403
// otherwise ("temporarily blocked from content creation", and a "status"
// in the body) and sends no retry-after: still the installation's
// secondary limit, backed off.
func TestContentCreationLimitIsASecondaryLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.Fault{Status: 403, Message: fakegithub.MsgSecondaryContent})
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	if rl := rateLimited(t, err); !rl.Secondary || rl.RetryAt.Sub(e.clock.Now()) != time.Minute {
		t.Fatalf("%+v, want a secondary limit backed off a minute", rl)
	}
}

func TestPermission403IsNotARateLimit(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultMissingPermission("pull_requests=read; contents=read"))
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
	var ae *forge.APIError
	if !errors.As(err, &ae) || ae.Status != 403 {
		t.Fatalf("err = %v, want APIError 403", err)
	}
	if _, ok := forge.IsRateLimited(err); ok {
		t.Error("a permission 403 was taken for a rate limit")
	}
	if needs, ok := forge.MissingPermission(err); !ok || needs != "pull_requests=read; contents=read" {
		t.Errorf("MissingPermission = %q, %v; want GitHub's X-Accepted-GitHub-Permissions", needs, ok)
	}
	if !strings.Contains(err.Error(), "needs pull_requests=read; contents=read") {
		t.Errorf("the error does not say what GitHub says the request needs: %v", err)
	}
	if _, ok := forge.MissingPermission(&forge.APIError{Status: 403, Message: "Upgrade to GitHub Pro or make this repository public to enable this feature."}); ok {
		t.Error("a plan's 403 was taken for a missing permission")
	}
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Errorf("next call blocked after a permission 403: %v", err)
	}
}

func TestRateLimitIsPerInstallation(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddRepo("555", "other/repo", "main")
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.AddPR("other/repo", fakegithub.PR{Number: 1})
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultRetryAfter(429, 60))
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err == nil {
		t.Fatal("want a rate limit")
	}
	if _, err := e.c.GetPR(e.ctx, "555", "other/repo", 1); err != nil {
		t.Errorf("another installation was blocked: %v", err)
	}
}
