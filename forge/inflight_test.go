package forge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
)

// readAll reads PR #1 of each tenant's repository (tenants: installation →
// owner/name), n times per tenant, all at once, and returns the errors.
func readAll(e *env, n int, tenants map[string]string) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for tn, r := range tenants {
		for range n {
			wg.Go(func() {
				if _, err := e.c.GetPR(e.ctx, tn, r, 1); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return errs
}

// Whoever sends them, an installation's requests are at most
// InstallationConcurrency at once as GitHub sees them; another
// installation is not held up by the first one's.
func TestInstallationRequestsAreBounded(t *testing.T) {
	e := newEnv(t, envOpts{})
	const other, otherRepo = "4242", "acme/tools"
	e.gh.AddRepo(other, otherRepo, "main")
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.AddPR(otherRepo, fakegithub.PR{Number: 1})
	e.gh.SetLatency(20 * time.Millisecond)

	if errs := readAll(e, 16, map[string]string{tenant: repo, other: otherRepo}); len(errs) > 0 {
		t.Fatalf("reads failed: %v", errs)
	}
	for _, tn := range []string{tenant, other} {
		if got := e.gh.PeakInFlight(tn); got != forge.DefaultInstallationConcurrency {
			t.Errorf("installation %s: %d requests at once, want %d (16 sent at once)", tn, got, forge.DefaultInstallationConcurrency)
		}
	}
}

// With one slot, a request whose token must be minted first still goes
// (the token request takes the slot and gives it back), and a request
// waiting its turn is timed from when it is sent, not from when it asked.
func TestOneAtATimeWaitsWithoutTimingOut(t *testing.T) {
	e := newEnv(t, envOpts{perInstallation: 1, timeout: 200 * time.Millisecond})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.SetLatency(50 * time.Millisecond)

	// 8 × 50 ms one after the other is twice the timeout: waiting must
	// not count.
	if errs := readAll(e, 8, map[string]string{tenant: repo}); len(errs) > 0 {
		t.Fatalf("reads failed: %v", errs)
	}
	if got := e.gh.PeakInFlight(tenant); got != 1 {
		t.Errorf("%d requests at once, want 1", got)
	}
	// 8 at once on one slot, 50 ms each: all but the first find it taken
	// (4 allows for goroutines that start late).
	if waited, total := e.c.Waits(tenant); waited < 4 || total <= 0 {
		t.Errorf("Waits = %d requests, %v in all; want at least 4 that waited, for some time", waited, total)
	}
}

// A caller that gives up while waiting for a slot gets its context's error
// and takes no slot with it: the next request goes as soon as the one in
// flight is answered.
func TestGivingUpWhileWaitingLeaksNoSlot(t *testing.T) {
	e := newEnv(t, envOpts{perInstallation: 1})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil { // mint the token
		t.Fatal(err)
	}
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultDelay(300*time.Millisecond))
	first := make(chan error, 1)
	go func() {
		_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
		first <- err
	}()
	testkit.Eventually(t, "the first request to reach the fake", func() bool { return e.gh.InFlight() > 0 })
	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := e.c.GetPR(ctx, tenant, repo, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting behind a slow request with a 20 ms deadline: %v, want the deadline", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the slow request: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.c.GetPR(e.ctx, tenant, repo, 1)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a request after the cancelled waiter never got the slot")
	}
}

// Error answers give their slot back too: go-github reads an error answer
// to its end and closes a copy of it, never the body it was given.
func TestErrorAnswersGiveTheirSlotBack(t *testing.T) {
	e := newEnv(t, envOpts{perInstallation: 1})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	for range 3 {
		var ae *forge.APIError
		if _, err := e.c.GetPR(ctx, tenant, repo, 404); !errors.As(err, &ae) || ae.Status != 404 {
			t.Fatalf("reading a PR that does not exist: %v, want a 404 APIError", err)
		}
	}
	if _, err := e.c.GetPR(ctx, tenant, repo, 1); err != nil {
		t.Fatalf("a request after three error answers, with one slot: %v", err)
	}
}

// Replicas share an installation's bound (SetReplicas): with 4 slots and
// 2 replicas each sends 2 at once; back to one replica, the same
// installation sends 4 again; with more replicas than slots, 1. It takes
// effect without a restart, on installations already in use.
func TestReplicasShareTheInstallationBound(t *testing.T) {
	e := newEnv(t, envOpts{})
	const second, secondRepo = "4242", "acme/tools"
	e.gh.AddRepo(second, secondRepo, "main")
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.AddPR(secondRepo, fakegithub.PR{Number: 1})
	// The second installation in use (its token minted) before any change.
	if _, err := e.c.GetPR(e.ctx, second, secondRepo, 1); err != nil {
		t.Fatal(err)
	}
	e.gh.SetLatency(20 * time.Millisecond)

	e.c.SetReplicas(2)
	if got := e.c.InstallationLimit(); got != 2 {
		t.Fatalf("InstallationLimit with 2 replicas = %d, want 2", got)
	}
	if errs := readAll(e, 12, map[string]string{tenant: repo}); len(errs) > 0 {
		t.Fatalf("reads failed: %v", errs)
	}
	if got := e.gh.PeakInFlight(tenant); got != 2 {
		t.Fatalf("2 replicas: %d requests at once, want 2 (half of %d)", got, forge.DefaultInstallationConcurrency)
	}
	e.c.SetReplicas(1) // grows, on an installation in use
	if errs := readAll(e, 12, map[string]string{tenant: repo}); len(errs) > 0 {
		t.Fatalf("reads failed: %v", errs)
	}
	if got := e.gh.PeakInFlight(tenant); got != forge.DefaultInstallationConcurrency {
		t.Fatalf("back to 1 replica: %d requests at once, want %d", got, forge.DefaultInstallationConcurrency)
	}
	e.c.SetReplicas(9) // shrinks, on the other installation in use
	if got := e.c.InstallationLimit(); got != 1 {
		t.Fatalf("InstallationLimit with 9 replicas = %d, want 1 (never 0)", got)
	}
	if errs := readAll(e, 8, map[string]string{second: secondRepo}); len(errs) > 0 {
		t.Fatalf("reads failed: %v", errs)
	}
	if got := e.gh.PeakInFlight(second); got != 1 {
		t.Fatalf("9 replicas: %d requests at once, want 1", got)
	}
}
