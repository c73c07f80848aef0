package reconcile

import (
	"context"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// A check_timeout fires within moments of its deadline, not at the next
// event or cron pass: every Sync reports the nearest check deadline of
// the repository's queues (SyncConfig.OnDeadline; the engine keeps a timer
// for it and runs the sync then), and reads again the entries whose
// deadline passed. The cron's start-up pass syncs every repository, which
// restores the timers after a restart.

// checkDeadline is when the entry's or the group's check_timeout ends
// under pol's timeout (zero: never).
func checkDeadline(since int64, timeout time.Duration) time.Time {
	if since <= 0 || timeout <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(since).Add(timeout)
}

// readOverdue marks to be read again every entry whose checks have been
// waiting past its base's check_timeout: the sync reads an entry that
// waits on checks only when an event says something changed, and a check
// that never reports sends none.
func (s *Syncer) readOverdue(ctx context.Context, l *leasedo.Lease) error {
	items, err := s.store.Items(ctx, l.Key)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	for _, it := range items {
		if it.Status != leasedo.StatusEvaluating {
			continue
		}
		at := checkDeadline(it.HeadAt, s.policyOf(l.Key, it.BaseRef).CheckTimeout)
		if at.IsZero() || now.Before(at) {
			continue
		}
		if _, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusQueued, it.GateReason); err != nil {
			return err
		}
	}
	return nil
}

// reportDeadline tells OnDeadline the nearest check deadline still ahead
// in k's queues: an entry waiting on its checks, a train's group under
// test (zero: none).
func (s *Syncer) reportDeadline(ctx context.Context, k leasedo.Key) error {
	if s.cfg.OnDeadline == nil {
		return nil
	}
	items, err := s.store.Items(ctx, k)
	if err != nil {
		return err
	}
	var next time.Time
	sooner := func(at time.Time) {
		if !at.IsZero() && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	train := false
	for _, it := range items {
		pol := s.policyOf(k, it.BaseRef)
		train = train || pol.InTrain()
		if it.Status == leasedo.StatusEvaluating {
			sooner(checkDeadline(it.HeadAt, pol.CheckTimeout))
		}
	}
	if train {
		groups, err := s.store.Groups(ctx, k)
		if err != nil {
			return err
		}
		for _, g := range groups {
			if g.State == leasedo.GroupTesting {
				sooner(checkDeadline(g.BuiltAt, s.policyOf(k, g.Base).CheckTimeout))
			}
		}
	}
	s.cfg.OnDeadline(k, next)
	return nil
}
