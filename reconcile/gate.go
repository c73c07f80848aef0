package reconcile

import (
	"context"
	"fmt"
	"sync"
)

// requestGate bounds the GitHub requests the Reconciler has in flight per
// installation. GitHub's guidance for secondary rate limits is to send a
// token's requests one after the other rather than concurrently (and never
// more than 100 at once); an installation is one token. The cron used to
// reconcile 4 repositories at once in tenant order, i.e. up to 4 requests
// in flight for one installation: the gate keeps that as the ceiling
// (DefaultInstallationConcurrency) however many repositories run at once,
// so a pass gets faster by spreading over installations, not by pressing
// harder on any one of them. It is shared by RunAll and Pass.
//
// Each installation's slots are a buffered channel created on first use;
// there is one per installation the App has, which is a small set.
type requestGate struct {
	per int

	mu    sync.Mutex
	slots map[string]chan struct{}
}

func newRequestGate(per int) *requestGate {
	return &requestGate{per: per, slots: map[string]chan struct{}{}}
}

// acquire waits for one of tenant's slots, or for ctx to end (its error is
// returned). release gives the slot back; call it exactly once.
func (g *requestGate) acquire(ctx context.Context, tenant string) (release func(), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	g.mu.Lock()
	ch, ok := g.slots[tenant]
	if !ok {
		ch = make(chan struct{}, g.per)
		g.slots[tenant] = ch
	}
	g.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// slot takes one of tenant's request slots and then checks the
// rate-limit budget, right before the request is sent: the check sees the
// answers of every request that has finished, so at most the installation's
// in-flight requests (InstallationConcurrency) can overshoot
// MinRateRemaining, as before the gate, when up to Concurrency (4)
// repositories of one installation ran at once. Below the minimum the slot
// is given back and the error wraps ErrRateLow.
func (r *Reconciler) slot(ctx context.Context, tenant string) (release func(), err error) {
	release, err = r.gate.acquire(ctx, tenant)
	if err != nil {
		return nil, err
	}
	if low, left := r.rateLow(tenant); low {
		release()
		return nil, fmt.Errorf("%d rate-limit points left (minimum %d): %w", left, r.minRate, ErrRateLow)
	}
	return release, nil
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
