package leasedo

import (
	"context"
	"fmt"
	"time"
)

// Fix is one thing reconcile repaired, as listed in results.fixed.
type Fix struct {
	Fix      string `json:"fix"` // duplicate_removed, bounced_removed, corrupt_removed, joined, left, reevaluated
	PRNumber int    `json:"prNumber"`
	PRSha    string `json:"prSha,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// ReconcileResults is the "results" object of POST /reconcile's answer.
type ReconcileResults struct {
	Fixed       []Fix        `json:"fixed"`
	StaleLeases []StaleLease `json:"staleLeases"`
}

// ReconcileAnswer is POST /reconcile's answer.
type ReconcileAnswer struct {
	Results     ReconcileResults `json:"results"`
	QueueLength int              `json:"queueLength"`
	EventCount  int              `json:"eventCount"`
}

// ResyncFunc runs under the reconcile lease (no transaction is open) and
// returns what it fixed; the cron passes the GitHub resync here.
type ResyncFunc func(ctx context.Context, l *Lease) ([]Fix, error)

// Reconcile is POST /reconcile (docs/lease-protocol.md, "Reconcile"): a lease older than the dead threshold
// is force-released and reported; then, under a freshly acquired lease (a
// LockedError when an active holder has it), duplicates, bounced entries and
// corrupted rows are removed, and resync (when not nil) runs. The answer is
// returned with the error of resync, so what was already fixed is reported.
func (s *Store) Reconcile(ctx context.Context, k Key, by string, resync ResyncFunc) (ans ReconcileAnswer, err error) {
	ans.Results.Fixed = []Fix{}
	ans.Results.StaleLeases = []StaleLease{}
	stale, err := s.releaseDead(ctx, k)
	if err != nil {
		return ans, err
	}
	if stale != nil {
		ans.Results.StaleLeases = append(ans.Results.StaleLeases, *stale)
	}
	l, err := s.Acquire(ctx, k, by)
	if err != nil {
		return ans, err
	}
	defer func() {
		if _, rerr := s.Release(context.WithoutCancel(ctx), l); rerr != nil && err == nil {
			err = rerr
		}
	}()
	fixed, err := s.fixIntegrity(ctx, l)
	if err != nil {
		return ans, err
	}
	ans.Results.Fixed = append(ans.Results.Fixed, fixed...)
	var resyncErr error
	if resync != nil {
		more, err := resync(ctx, l)
		ans.Results.Fixed = append(ans.Results.Fixed, more...)
		resyncErr = err
	}
	err = s.db.read(ctx, func(tx *wtx) error {
		var err error
		if ans.QueueLength, err = queueLength(ctx, tx, k); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM events WHERE tenant = ? AND repo = ? LIMIT ?) AS kept`,
			k.Tenant, k.Repo, EventCap).Scan(&ans.EventCount)
	})
	if err != nil {
		return ans, fmt.Errorf("%s: reconcile counts: %w", k, err)
	}
	return ans, resyncErr
}

// releaseDead deletes k's lease when it is older than the dead threshold.
func (s *Store) releaseDead(ctx context.Context, k Key) (*StaleLease, error) {
	var out *StaleLease
	err := s.db.write(ctx, func(tx *wtx) error {
		cur, err := getLease(ctx, tx, k)
		if err != nil || cur == nil {
			return err
		}
		age := s.now().UnixMilli() - cur.ts
		if time.Duration(age)*time.Millisecond < s.dead {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE tenant = ? AND repo = ? AND token = ?`, k.Tenant, k.Repo, cur.token); err != nil {
			return fmt.Errorf("%s: release dead lease: %w", k, err)
		}
		out = &StaleLease{HeldBy: cur.heldBy, AgeMS: age}
		return s.db.released(ctx, tx, k)
	})
	return out, err
}

// fixIntegrity removes duplicate entries of one PR (the earliest stays),
// bounced entries, and corrupted rows (unknown status, no sha, no number).
func (s *Store) fixIntegrity(ctx context.Context, l *Lease) ([]Fix, error) {
	k := l.Key
	fixed := []Fix{}
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		type row struct {
			id     int64
			pr     int
			sha    string
			status string
		}
		rows, err := tx.QueryContext(ctx, `SELECT id, pr_number, pr_sha, status FROM queue WHERE tenant = ? AND repo = ? ORDER BY queued_at, id`, k.Tenant, k.Repo)
		if err != nil {
			return fmt.Errorf("%s: reconcile read queue: %w", k, err)
		}
		var all []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.pr, &r.sha, &r.status); err != nil {
				rows.Close()
				return fmt.Errorf("%s: reconcile read queue: %w", k, err)
			}
			all = append(all, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: reconcile read queue: %w", k, err)
		}
		seen := map[int]bool{}
		for _, r := range all {
			var fix string
			switch {
			case r.pr <= 0 || r.sha == "" || !validStatus(r.status):
				fix = "corrupt_removed"
			case r.status == StatusBounced:
				fix = "bounced_removed"
			case seen[r.pr]:
				fix = "duplicate_removed"
			default:
				seen[r.pr] = true
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE id = ?`, r.id); err != nil {
				return fmt.Errorf("%s: reconcile remove #%d: %w", k, r.pr, err)
			}
			if err := insertAudit(ctx, tx, k, now, AuditLeave, r.pr, r.sha, "reconcile: "+fix); err != nil {
				return err
			}
			fixed = append(fixed, Fix{Fix: fix, PRNumber: r.pr, PRSha: r.sha})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fixed, nil
}

func validStatus(s string) bool {
	switch s {
	case StatusQueued, StatusEvaluating, StatusGatePassed, StatusBlocked, StatusBounced:
		return true
	}
	return false
}
