package leasedo

import (
	"context"
	"database/sql"
	"fmt"
)

// Item is a queue entry with what the engine keeps beside the seed's fields.
type Item struct {
	Entry
	GateReason       string `json:"gateReason,omitempty"`
	BaseRef          string `json:"baseRef,omitempty"`
	BranchUpdatedSha string `json:"branchUpdatedSha,omitempty"`
	CheckRunID       int64  `json:"checkRunId,omitempty"`
	CheckTitle       string `json:"checkTitle,omitempty"`
}

// Items returns the queue of k in order (queuedAt, then arrival).
func (s *Store) Items(ctx context.Context, k Key) ([]Item, error) {
	return items(ctx, s.db.r, k)
}

func items(ctx context.Context, q querier, k Key) ([]Item, error) {
	rows, err := q.QueryContext(ctx, `SELECT pr_number, pr_sha, queued_at, status, reevaluated_at, gate_result, gate_result_at,
			gate_reason, base_ref, branch_updated_sha, check_run_id, check_title
		FROM queue WHERE tenant = ? AND repo = ? ORDER BY queued_at, id`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read queue: %w", k, err)
	}
	defer rows.Close()
	out := []Item{}
	for rows.Next() {
		var it Item
		var reev, gateAt sql.NullInt64
		var gate sql.NullString
		if err := rows.Scan(&it.PRNumber, &it.PRSha, &it.QueuedAt, &it.Status, &reev, &gate, &gateAt,
			&it.GateReason, &it.BaseRef, &it.BranchUpdatedSha, &it.CheckRunID, &it.CheckTitle); err != nil {
			return nil, fmt.Errorf("%s: read queue: %w", k, err)
		}
		if reev.Valid {
			it.ReevaluatedAt = &reev.Int64
		}
		if gateAt.Valid {
			it.GateResultAt = &gateAt.Int64
		}
		it.GateResult = gate.String
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: read queue: %w", k, err)
	}
	return out, nil
}

// Queue returns the queue of k in the seed's shape.
func (s *Store) Queue(ctx context.Context, k Key) ([]Entry, error) {
	its, err := s.Items(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(its))
	for i, it := range its {
		out[i] = it.Entry
	}
	return out, nil
}

// Events returns the event log of k, oldest first (at most EventCap).
func (s *Store) Events(ctx context.Context, k Key) ([]LoggedEvent, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT ts, event_type, action, pr_number, details FROM
		(SELECT id, ts, event_type, action, pr_number, details FROM events
		 WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, k.Tenant, k.Repo, EventCap)
	if err != nil {
		return nil, fmt.Errorf("%s: read events: %w", k, err)
	}
	defer rows.Close()
	out := []LoggedEvent{}
	for rows.Next() {
		var e LoggedEvent
		var details sql.NullString
		if err := rows.Scan(&e.TS, &e.EventType, &e.Action, &e.PRNumber, &details); err != nil {
			return nil, fmt.Errorf("%s: read events: %w", k, err)
		}
		if details.Valid {
			e.Details = []byte(details.String)
		} else {
			e.Details = []byte("null")
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Audit returns the audit log of k, oldest first (at most AuditCap).
func (s *Store) Audit(ctx context.Context, k Key) ([]AuditEntry, error) {
	return s.AuditTail(ctx, k, AuditCap)
}

// AuditTail returns the last n entries of k's audit log, oldest first: the
// dashboard's overview shows a few per repository, and reading each
// repository's whole log for them was a third of its render time.
func (s *Store) AuditTail(ctx context.Context, k Key, n int) ([]AuditEntry, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT ts, action, pr_number, pr_sha, reason FROM
		(SELECT id, ts, action, pr_number, pr_sha, reason FROM audit
		 WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT ?) ORDER BY id`, k.Tenant, k.Repo, min(n, AuditCap))
	if err != nil {
		return nil, fmt.Errorf("%s: read audit: %w", k, err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var a AuditEntry
		if err := rows.Scan(&a.TS, &a.Action, &a.PRNumber, &a.PRSha, &a.Reason); err != nil {
			return nil, fmt.Errorf("%s: read audit: %w", k, err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// RecordGate records a gate verdict for pr at sha under l: "success" →
// gate_passed, "failure" → bounced, "" → evaluating with reason (what it
// waits for). An entry whose sha moved meanwhile is left alone.
func (s *Store) RecordGate(ctx context.Context, l *Lease, pr int, sha, result, reason string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		return s.recordGate(ctx, tx, l.Key, pr, sha, result, reason, now)
	})
}

// MarkMerged removes pr after GitHub merged it at sha, with audit "merge".
func (s *Store) MarkMerged(ctx context.Context, l *Lease, pr int, sha, method string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, l.Key.Tenant, l.Key.Repo, pr); err != nil {
			return fmt.Errorf("%s: merged #%d: %w", l.Key, pr, err)
		}
		return insertAudit(ctx, tx, l.Key, now, AuditMerge, pr, sha, method)
	})
}

// Bounce sets pr bounced (GitHub refused the merge, or the gate failed) with
// audit "bounce" and the reason the author is told.
func (s *Store) Bounce(ctx context.Context, l *Lease, pr int, sha, reason string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ?, gate_reason = ? WHERE tenant = ? AND repo = ? AND pr_number = ?`,
			StatusBounced, reason, l.Key.Tenant, l.Key.Repo, pr); err != nil {
			return fmt.Errorf("%s: bounce #%d: %w", l.Key, pr, err)
		}
		return insertAudit(ctx, tx, l.Key, now, AuditBounce, pr, sha, reason)
	})
}

// SetCheckRun remembers the id and last title of pr's mergegate check run.
func (s *Store) SetCheckRun(ctx context.Context, l *Lease, pr int, sha string, id int64, title string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE queue SET check_run_id = ?, check_title = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ?`,
			id, title, l.Key.Tenant, l.Key.Repo, pr, sha)
		if err != nil {
			return fmt.Errorf("%s: check run of #%d: %w", l.Key, pr, err)
		}
		return nil
	})
}

// MarkBranchUpdated remembers that GitHub was asked to update pr's branch at
// head sha, so it is asked once per head, not on every pass.
func (s *Store) MarkBranchUpdated(ctx context.Context, l *Lease, pr int, sha, base string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE queue SET branch_updated_sha = ?, base_ref = CASE WHEN ? != '' THEN ? ELSE base_ref END
			WHERE tenant = ? AND repo = ? AND pr_number = ?`, sha, base, base, l.Key.Tenant, l.Key.Repo, pr)
		if err != nil {
			return fmt.Errorf("%s: branch update of #%d: %w", l.Key, pr, err)
		}
		return nil
	})
}

// SetBase records pr's base branch when it was learned from GitHub.
func (s *Store) SetBase(ctx context.Context, l *Lease, pr int, base string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE queue SET base_ref = ? WHERE tenant = ? AND repo = ? AND pr_number = ?`, base, l.Key.Tenant, l.Key.Repo, pr)
		if err != nil {
			return fmt.Errorf("%s: base of #%d: %w", l.Key, pr, err)
		}
		return nil
	})
}

// underLease runs fn in one write transaction fenced by l.
func (s *Store) underLease(ctx context.Context, l *Lease, fn func(tx *wtx, now int64) error) error {
	return s.db.write(ctx, func(tx *wtx) error {
		if err := s.fence(ctx, tx, l); err != nil {
			return err
		}
		return fn(tx, s.now().UnixMilli())
	})
}
