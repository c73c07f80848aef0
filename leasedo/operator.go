package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Audit actions of an operator's queue action (POST /queue/move,
// /queue/remove, /queue/retry): the reason says who and why.
const (
	AuditMove   = "move"
	AuditRemove = "remove"
	AuditRetry  = "retry"
)

// ErrNotQueued is an operator's action on a pull request that is not in
// the queue (or, for a retry, not blocked).
var ErrNotQueued = errors.New("not in the queue")

// operatorReason is an operator action's audit reason: who, then why.
func operatorReason(what, by, why string) string {
	r := what + " by " + by
	if why != "" {
		r += ": " + why
	}
	return r
}

// MoveEntry moves pr to the front (front) or the back of its base
// branch's queue among the entries of its priority (priority labels still
// rank first): its queued_at becomes one millisecond before the first's
// or after the last's. It reports whether its place changed; the audit
// says who moved it and why. Every other entry of the base is read again,
// so that the head is chosen anew.
func (s *Store) MoveEntry(ctx context.Context, l *Lease, pr int, front bool, by, why string) (moved bool, err error) {
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		k := l.Key
		var sha, base string
		var prio int
		var at int64
		err := tx.QueryRowContext(ctx, `SELECT pr_sha, base_ref, priority, queued_at FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != ?`,
			k.Tenant, k.Repo, pr, StatusBounced).Scan(&sha, &base, &prio, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("#%d: %w", pr, ErrNotQueued)
		}
		if err != nil {
			return fmt.Errorf("%s: move #%d: %w", k, pr, err)
		}
		q := `SELECT MIN(queued_at) - 1 FROM queue WHERE tenant = ? AND repo = ? AND base_ref = ? AND priority = ? AND pr_number != ? AND queued_at <= ?`
		what := "moved to the front"
		if !front {
			q = `SELECT MAX(queued_at) + 1 FROM queue WHERE tenant = ? AND repo = ? AND base_ref = ? AND priority = ? AND pr_number != ? AND queued_at >= ?`
			what = "moved to the back"
		}
		var to sql.NullInt64
		if err := tx.QueryRowContext(ctx, q, k.Tenant, k.Repo, base, prio, pr, at).Scan(&to); err != nil {
			return fmt.Errorf("%s: move #%d: %w", k, pr, err)
		}
		if !to.Valid {
			return nil // already there
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET queued_at = ? WHERE tenant = ? AND repo = ? AND pr_number = ?`, to.Int64, k.Tenant, k.Repo, pr); err != nil {
			return fmt.Errorf("%s: move #%d: %w", k, pr, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND base_ref = ? AND status IN (?, ?)`,
			StatusQueued, k.Tenant, k.Repo, base, StatusEvaluating, StatusGatePassed); err != nil {
			return fmt.Errorf("%s: move #%d: %w", k, pr, err)
		}
		moved = true
		return insertAudit(ctx, tx, k, now, AuditMove, pr, sha, operatorReason(what, by, why))
	})
	return moved, err
}

// RemoveEntry takes pr out of the queue for an operator: the row goes,
// and its check run's ending waits in the outbox with end (a comment
// saying who and why, the trigger labels to take off), as a bounce's
// does. The audit (remove) says who and why.
func (s *Store) RemoveEntry(ctx context.Context, l *Lease, pr int, by, why string, end CheckRunEnd) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		k := l.Key
		var sha string
		var runID int64
		err := tx.QueryRowContext(ctx, `SELECT pr_sha, check_run_id FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? ORDER BY queued_at, id LIMIT 1`,
			k.Tenant, k.Repo, pr).Scan(&sha, &runID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("#%d: %w", pr, ErrNotQueued)
		}
		if err != nil {
			return fmt.Errorf("%s: remove #%d: %w", k, pr, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, k.Tenant, k.Repo, pr); err != nil {
			return fmt.Errorf("%s: remove #%d: %w", k, pr, err)
		}
		if err := endCheckRun(ctx, tx, k, pr, sha, runID, now, end); err != nil {
			return err
		}
		return insertAudit(ctx, tx, k, now, AuditRemove, pr, sha, operatorReason("taken out", by, why))
	})
}

// RetryBlocked makes a blocked pr be tried again at the next sync rather
// than at the cron's next pass; the audit (retry) says who.
func (s *Store) RetryBlocked(ctx context.Context, l *Lease, pr int, by string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		k := l.Key
		var sha string
		err := tx.QueryRowContext(ctx, `SELECT pr_sha FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND status = ?`,
			k.Tenant, k.Repo, pr, StatusBlocked).Scan(&sha)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("#%d is not blocked: %w", pr, ErrNotQueued)
		}
		if err != nil {
			return fmt.Errorf("%s: retry #%d: %w", k, pr, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND pr_number = ?`, StatusQueued, k.Tenant, k.Repo, pr); err != nil {
			return fmt.Errorf("%s: retry #%d: %w", k, pr, err)
		}
		return insertAudit(ctx, tx, k, now, AuditRetry, pr, sha, operatorReason("retried now", by, ""))
	})
}
