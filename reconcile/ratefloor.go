package reconcile

import (
	"context"
	"fmt"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
)

// rateFloor is checked before each of the Reconciler's GitHub requests:
// below MinRateRemaining points left for tenant, the request is not sent
// and the error wraps ErrRateLow, so the cron's pass leaves the
// installation's budget to the engine. withRateFloor makes forge check it
// once the request holds one of the installation's slots, right before it
// is sent: the check sees the answers of every request that has finished,
// so only those in flight (forge's per-installation bound) can overshoot.
func (r *Reconciler) rateFloor(tenant string) error {
	if low, left := r.rateLow(tenant); low {
		return fmt.Errorf("%d rate-limit points left (minimum %d): %w", left, r.minRate, ErrRateLow)
	}
	return nil
}

// holding is ctx whose GitHub requests each confirm first that l is still
// held (leasedo.Store.Hold, a database write at most every third of the
// TTL): a pass whose lease went stale and was taken over, its process
// paused past the TTL, sends nothing more for the repository.
func holding(ctx context.Context, store *leasedo.Store, l *leasedo.Lease) context.Context {
	return forge.WithSendCheck(ctx, func() error { return store.Hold(ctx, l) })
}

// withRateFloor is ctx for requests of tenant that forge sends only above
// the floor.
func (r *Reconciler) withRateFloor(ctx context.Context, tenant string) context.Context {
	return forge.WithSendCheck(ctx, func() error { return r.rateFloor(tenant) })
}
