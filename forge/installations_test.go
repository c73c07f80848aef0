package forge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

func TestListInstallationsPagesAndSuspension(t *testing.T) {
	e := newEnv(t, envOpts{})
	for i := 1; i <= 120; i++ {
		e.gh.AddInstallation(fmt.Sprint(50000 + i))
	}
	e.gh.SuspendInstallation("50007", true)

	got, err := e.c.ListInstallations(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 121 { // 120 + the env's tenant
		t.Fatalf("listed %d installations, want 121", len(got))
	}
	suspended := 0
	for _, in := range got {
		if in.Suspended {
			suspended++
			if in.Tenant != "50007" {
				t.Errorf("installation %s reported suspended", in.Tenant)
			}
		}
		if in.Tenant == tenant && in.Account != "octo" {
			t.Errorf("account of %s = %q, want octo", tenant, in.Account)
		}
	}
	if suspended != 1 {
		t.Errorf("%d suspended, want 1", suspended)
	}
	if n := e.gh.CallCount(fakegithub.RouteListInstallations); n != 2 {
		t.Errorf("%d listing requests, want 2 pages", n)
	}

	// Unchanged: both pages answer 304, and the App's JWT costs no
	// installation any point.
	_, before := e.c.Stats()
	if _, err := e.c.ListInstallations(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, after := e.c.Stats(); after-before != 2 {
		t.Errorf("%d of 2 pages were 304", after-before)
	}
	if used := e.gh.RateLimitUsed(); used != 0 {
		t.Errorf("rate-limit points used = %d, want 0", used)
	}
}

// The App's login is its slug and "[bot]", read with the App's JWT (no
// installation's points).
func TestAppLogin(t *testing.T) {
	e := newEnv(t, envOpts{})
	got, err := e.c.AppLogin(e.ctx)
	if err != nil || got != fakegithub.AppBotLogin {
		t.Fatalf("AppLogin = %q, %v; want %q", got, err, fakegithub.AppBotLogin)
	}
	if n := e.gh.CallCount(fakegithub.RouteGetApp); n != 1 {
		t.Errorf("%d GET /app, want 1", n)
	}
	if used := e.gh.RateLimitUsed(); used != 0 {
		t.Errorf("rate-limit points used = %d, want 0", used)
	}
}

func TestSuspendedInstallationGetsNoToken(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SuspendInstallation(tenant, true)
	if _, err := e.c.ListOpenPRs(e.ctx, tenant, repo); err == nil {
		t.Fatal("a suspended installation got a token")
	}
}

func TestTriggerTimes(t *testing.T) {
	e := newEnv(t, envOpts{})
	t0 := e.clock.Now().Add(-2 * time.Hour).UTC()
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, Labels: []string{"AutoMerge", "bug"}, LabeledAt: t0, CreatedAt: t0.Add(-time.Hour)})
	e.gh.AddPR(repo, fakegithub.PR{Number: 2, AutoMerge: true, AutoMergeAt: t0.Add(time.Minute), CreatedAt: t0})
	e.gh.AddPR(repo, fakegithub.PR{Number: 3})

	tt, err := e.c.TriggerTimes(e.ctx, tenant, repo, 1, "automerge")
	if err != nil {
		t.Fatal(err)
	}
	if !tt.LabeledAt.Equal(t0) || !tt.AutoMergeAt.IsZero() {
		t.Errorf("#1 = %+v, want labeled at %v (case-insensitive), no auto-merge", tt, t0)
	}

	// Removed and added again later: the latest labeled event counts.
	e.gh.SetLabels(repo, 1, "bug")
	e.clock.Advance(time.Minute)
	e.gh.SetLabels(repo, 1, "bug", "automerge")
	if tt, _ = e.c.TriggerTimes(e.ctx, tenant, repo, 1, "automerge"); !tt.LabeledAt.Equal(e.clock.Now().UTC()) {
		t.Errorf("#1 relabelled: labeled at %v, want %v", tt.LabeledAt, e.clock.Now().UTC())
	}

	if tt, _ = e.c.TriggerTimes(e.ctx, tenant, repo, 2, "automerge"); !tt.AutoMergeAt.Equal(t0.Add(time.Minute)) || !tt.LabeledAt.IsZero() {
		t.Errorf("#2 = %+v, want auto-merge at %v", tt, t0.Add(time.Minute))
	}
	if tt, _ = e.c.TriggerTimes(e.ctx, tenant, repo, 3, "automerge"); !tt.LabeledAt.IsZero() || !tt.AutoMergeAt.IsZero() {
		t.Errorf("#3 = %+v, want no trigger", tt)
	}

	// An unchanged log is revalidated with a 304.
	_, before := e.c.Stats()
	if _, err := e.c.TriggerTimes(e.ctx, tenant, repo, 3, "automerge"); err != nil {
		t.Fatal(err)
	}
	if _, after := e.c.Stats(); after != before+1 {
		t.Errorf("unchanged issue events not answered 304")
	}
	if _, err := e.c.TriggerTimes(e.ctx, tenant, repo, 99, "automerge"); err == nil {
		t.Error("events of a missing PR: no error")
	}
}
