package reconcile

import (
	"context"
	"strings"
	"time"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
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
		for _, base := range s.trainBases(k, items, groups) {
			sooner(batchWaitUntil(base, items, groups, s.policyOf(k, base), s.clock.Now()))
		}
	}
	s.cfg.OnDeadline(k, next)
	return nil
}

// batchWaitUntil is when a ready entry of base's train that waits for one
// ahead of it (batch_wait) may go without it (zero: none waits): the
// sync runs then, as at a check deadline.
func batchWaitUntil(base string, items []leasedo.Item, all []leasedo.Group, pol rules.Policy, now time.Time) time.Time {
	f := rules.TrainFacts{Base: base, Now: now}
	for _, g := range all {
		if g.Base == base {
			f.Groups = append(f.Groups, g)
		}
	}
	f.Ready, f.Pending = waitingEntries(base, items, f.Groups, pol.Train.Speculate)
	return rules.BatchWaitUntil(f, pol)
}

// waitingEntries are base's entries in no group, in queue order: those
// ready for the train (with speculate, those too whose own checks still
// run and that would be ready were they passed: rules.Speculating), and
// those whose own checks still run (not held).
func waitingEntries(base string, items []leasedo.Item, groups []leasedo.Group, speculate bool) (ready, pending []leasedo.Item) {
	inGroup := map[int]bool{}
	for _, g := range groups {
		for _, m := range g.PRs {
			inGroup[m.Number] = true
		}
	}
	for _, it := range items {
		if it.BaseRef != base || inGroup[it.PRNumber] {
			continue
		}
		switch {
		case it.Status == leasedo.StatusGatePassed && it.GateReason == rules.ReadyReason,
			speculate && rules.Speculating(it):
			ready = append(ready, it)
		case it.Status == leasedo.StatusEvaluating && !strings.HasPrefix(it.GateReason, rules.HeldPrefix):
			pending = append(pending, it)
		}
	}
	return ready, pending
}
