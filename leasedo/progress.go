package leasedo

import (
	"context"
	"fmt"
	"time"
)

// CountKeptDeliveries counts what KeptDeliveries would hand over (k's
// deliveries received at since or later whose body is kept): the total
// export's progress counts towards.
func (s *Store) CountKeptDeliveries(ctx context.Context, k Key, since time.Time) (int64, error) {
	var n int64
	err := s.db.r.QueryRowContext(ctx, `SELECT count(*) FROM deliveries d JOIN delivery_bodies kept ON kept.seq = d.seq
		WHERE d.tenant = ? AND d.repo = ? AND d.received_at >= ?`, k.Tenant, k.Repo, since.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("%s: count kept deliveries: %w", k, err)
	}
	return n, nil
}

// Activity is what the dashboard's pictures are drawn from: a
// repository's audit rows since a time, oldest first, and its queue's
// length now, read in one snapshot. The audit keeps the last AuditCap rows
// of each repository: Since is when the rows read begin, and Complete says
// whether they reach back to the time asked for.
type Activity struct {
	Audit       []AuditEntry
	QueueLength int
	// Complete: the audit holds every row since the time asked for (no
	// row before it was dropped by the cap).
	Complete bool
}

// ActivitySince reads k's Activity since since in one read transaction.
func (s *Store) ActivitySince(ctx context.Context, k Key, since time.Time) (Activity, error) {
	var a Activity
	err := s.db.read(ctx, func(tx *wtx) error {
		var err error
		if a.QueueLength, err = queueLength(ctx, tx, k); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT ts, action, pr_number, pr_sha, reason FROM audit
			WHERE tenant = ? AND repo = ? AND ts >= ? ORDER BY id`, k.Tenant, k.Repo, since.UnixMilli())
		if err != nil {
			return fmt.Errorf("%s: read activity: %w", k, err)
		}
		defer rows.Close()
		a.Audit = []AuditEntry{}
		for rows.Next() {
			var e AuditEntry
			if err := rows.Scan(&e.TS, &e.Action, &e.PRNumber, &e.PRSha, &e.Reason); err != nil {
				return fmt.Errorf("%s: read activity: %w", k, err)
			}
			a.Audit = append(a.Audit, e)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("%s: read activity: %w", k, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM audit WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo).Scan(&n); err != nil {
			return fmt.Errorf("%s: read activity: %w", k, err)
		}
		a.Complete = n < AuditCap || len(a.Audit) < n
		return nil
	})
	return a, err
}
