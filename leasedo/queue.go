package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/mergegate/mergegate/lifecycle"
)

// Items returns the queue of k in order: priority (higher first), then
// queuedAt, then arrival.
func (s *Store) Items(ctx context.Context, k Key) ([]Item, error) {
	return items(ctx, s.db.r, k)
}

func items(ctx context.Context, q querier, k Key) ([]Item, error) {
	rows, err := q.QueryContext(ctx, `SELECT pr_number, pr_sha, queued_at, status, reevaluated_at, gate_result, gate_result_at,
			gate_reason, base_ref, branch_updated_sha, branch_updated_at, check_run_id, check_title, head_at, merge_method, priority, priority_name,
			consent_sha, consent_note
		FROM queue WHERE tenant = ? AND repo = ? ORDER BY priority DESC, queued_at, id`, k.Tenant, k.Repo)
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
			&it.GateReason, &it.BaseRef, &it.BranchUpdatedSha, &it.BranchUpdatedAt, &it.CheckRunID, &it.CheckTitle, &it.HeadAt, &it.MergeMethod, &it.Priority, &it.PriorityName,
			&it.ConsentSha, &it.ConsentNote); err != nil {
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

// Queue returns the queue of k in the protocol's shape (docs/lease-protocol.md).
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
		 WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT ?) AS last ORDER BY id`, k.Tenant, k.Repo, EventCap)
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
// dashboard's overview shows a few per repository, and reads no more.
func (s *Store) AuditTail(ctx context.Context, k Key, n int) ([]AuditEntry, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT ts, action, pr_number, pr_sha, reason FROM
		(SELECT id, ts, action, pr_number, pr_sha, reason FROM audit
		 WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT ?) AS last ORDER BY id`, k.Tenant, k.Repo, min(n, AuditCap))
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

// The typed transitions below are what a sync of the repository does to an
// entry after deciding (package rules); each is one transaction fenced by
// the lease, and each names pr at sha so that an entry whose head moved
// meanwhile is left alone.

// Wait records that pr at sha waits, and for what (reason, shown on its
// check run): status is StatusEvaluating (its checks have not passed),
// StatusGatePassed (they have) or StatusQueued (read again at the next
// sync: GitHub settles it by itself, after a short pause). The first time
// its gate passes at this head, audit gate_success. It reports whether
// anything changed.
func (s *Store) Wait(ctx context.Context, l *Lease, pr int, sha, status, reason string) (changed bool, err error) {
	switch status {
	case StatusEvaluating, StatusGatePassed, StatusQueued:
	default:
		return false, fmt.Errorf("%s: wait #%d: status %q is not a waiting status", l.Key, pr, status)
	}
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var cur, curReason string
		var gate sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT status, gate_reason, gate_result FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ? AND status != ?`,
			l.Key.Tenant, l.Key.Repo, pr, sha, StatusBounced).Scan(&cur, &curReason, &gate)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: wait #%d: %w", l.Key, pr, err)
		}
		passedNow := status == StatusGatePassed && gate.String != lifecycle.GateSuccess
		changed = cur != status || curReason != reason || passedNow
		if !changed {
			return nil
		}
		result, resultAt := gate, sql.NullInt64{}
		switch {
		case passedNow:
			result, resultAt = sql.NullString{String: lifecycle.GateSuccess, Valid: true}, sql.NullInt64{Int64: now, Valid: true}
		case status == StatusEvaluating:
			// Not passed (a check ran again and has not concluded).
			result = sql.NullString{}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ?, gate_reason = ?, gate_result = ?,
				gate_result_at = CASE WHEN ? != 0 THEN ? WHEN CAST(? AS TEXT) IS NULL THEN NULL ELSE gate_result_at END
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ?`,
			status, reason, result, resultAt.Valid, resultAt, result, l.Key.Tenant, l.Key.Repo, pr, sha); err != nil {
			return fmt.Errorf("%s: wait #%d: %w", l.Key, pr, err)
		}
		if passedNow {
			return insertAudit(ctx, tx, l.Key, now, AuditGateSuccess, pr, sha, "")
		}
		return nil
	})
	return changed, err
}

// Block records that pr at sha waits for the operator (reason: what to
// change). It keeps its place, and entries behind it go on. Audit blocked
// is written when the reason is new; changed reports that, so the caller
// logs it once per change.
func (s *Store) Block(ctx context.Context, l *Lease, pr int, sha, reason string) (changed bool, err error) {
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var cur, curReason string
		err := tx.QueryRowContext(ctx, `SELECT status, gate_reason FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ? AND status != ?`,
			l.Key.Tenant, l.Key.Repo, pr, sha, StatusBounced).Scan(&cur, &curReason)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: block #%d: %w", l.Key, pr, err)
		}
		if curReason == reason && (cur == StatusBlocked || cur == StatusQueued) {
			// Said already; a cron pass set it queued to try again.
			_, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ?`,
				StatusBlocked, l.Key.Tenant, l.Key.Repo, pr, sha)
			return err
		}
		changed = true
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ?, gate_reason = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ?`,
			StatusBlocked, reason, l.Key.Tenant, l.Key.Repo, pr, sha); err != nil {
			return fmt.Errorf("%s: block #%d: %w", l.Key, pr, err)
		}
		return insertAudit(ctx, tx, l.Key, now, AuditBlocked, pr, sha, reason)
	})
	return changed, err
}

// CheckRunEnd is how a mergegate check run ends.
type CheckRunEnd struct {
	Conclusion string // success, failure or neutral
	Title      string
	Summary    string
	// Comment, when set, is posted on the pull request before the run
	// ends (a bounce's sentence); Unlabel are labels to take off it.
	// Both wait in the outbox with the ending: the write budget may hold
	// them back, and nothing a person needs is dropped.
	Comment string
	Unlabel []string
}

// Bounce takes pr at sha out of the queue (status bounced): its author must
// fix something, and reason is the sentence they read. gateFailed marks a
// failed gate (audit gate_failure before bounce, as the protocol has it). The
// check run ends with end.
func (s *Store) Bounce(ctx context.Context, l *Lease, pr int, sha, reason string, gateFailed bool, end CheckRunEnd) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var runID int64
		err := tx.QueryRowContext(ctx, `SELECT check_run_id FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ? AND status != ?`,
			l.Key.Tenant, l.Key.Repo, pr, sha, StatusBounced).Scan(&runID)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: bounce #%d: %w", l.Key, pr, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ?, gate_reason = ?,
				gate_result = CASE WHEN ? != 0 THEN ? ELSE gate_result END,
				gate_result_at = CASE WHEN ? != 0 THEN ? ELSE gate_result_at END
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ?`,
			StatusBounced, reason, gateFailed, lifecycle.GateFailure, gateFailed, now, l.Key.Tenant, l.Key.Repo, pr, sha); err != nil {
			return fmt.Errorf("%s: bounce #%d: %w", l.Key, pr, err)
		}
		if gateFailed {
			if err := insertAudit(ctx, tx, l.Key, now, AuditGateFailure, pr, sha, reason); err != nil {
				return err
			}
		}
		if err := endCheckRun(ctx, tx, l.Key, pr, sha, runID, now, end); err != nil {
			return err
		}
		return insertAudit(ctx, tx, l.Key, now, AuditBounce, pr, sha, reason)
	})
}

// MarkMerged removes pr after GitHub merged it at sha, with audit "merge"
// (reason: the method) and its check run ended with end.
func (s *Store) MarkMerged(ctx context.Context, l *Lease, pr int, sha, method string, end CheckRunEnd) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		return mergedEntry(ctx, tx, l.Key, pr, sha, method, now, end)
	})
}

func mergedEntry(ctx context.Context, tx *wtx, k Key, pr int, sha, method string, now int64, end CheckRunEnd) error {
	var runID int64
	err := tx.QueryRowContext(ctx, `SELECT check_run_id FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? ORDER BY queued_at, id LIMIT 1`,
		k.Tenant, k.Repo, pr).Scan(&runID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: merged #%d: %w", k, pr, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, k.Tenant, k.Repo, pr); err != nil {
		return fmt.Errorf("%s: merged #%d: %w", k, pr, err)
	}
	if err := endCheckRun(ctx, tx, k, pr, sha, runID, now, end); err != nil {
		return err
	}
	return insertAudit(ctx, tx, k, now, AuditMerge, pr, sha, method)
}

// Join, Leave and Reevaluate are the event transitions for a sync that
// learned them from GitHub (the cron's resync, the engine's re-read of the
// head): audited, not written to the event log, which holds what arrived.
func (s *Store) Join(ctx context.Context, l *Lease, pr int, d Details) (string, error) {
	var res string
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var err error
		res, err = joinEntry(ctx, tx, l.Key, pr, &d, now)
		return err
	})
	return res, err
}

// Leave takes pr out of the queue with the reason; its check run ends.
func (s *Store) Leave(ctx context.Context, l *Lease, pr int, reason string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := leaveEntry(ctx, tx, l.Key, pr, now, reason)
		return err
	})
}

// Reevaluate gives pr a new head sha or base branch (empty: unchanged).
func (s *Store) Reevaluate(ctx context.Context, l *Lease, pr int, sha, base, reason string) (string, error) {
	var res string
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var err error
		res, err = reevaluateEntry(ctx, tx, l.Key, pr, sha, base, now, reason)
		return err
	})
	return res, err
}

// Recheck marks every entry of k in one of statuses to be read again at the
// next sync (the cron's pass: a lost check event is repaired, a blocked
// entry is tried again). It returns how many were marked.
func (s *Store) Recheck(ctx context.Context, l *Lease, statuses ...string) (int, error) {
	var n int64
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		for _, st := range statuses {
			res, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND status = ?`,
				StatusQueued, l.Key.Tenant, l.Key.Repo, st)
			if err != nil {
				return fmt.Errorf("%s: recheck: %w", l.Key, err)
			}
			m, _ := res.RowsAffected()
			n += m
		}
		return nil
	})
	return int(n), err
}

// RecheckPRs marks the entries of prs that wait (evaluating, gate passed
// or blocked) to be read again at the next sync, and returns how many.
func (s *Store) RecheckPRs(ctx context.Context, l *Lease, prs []int) (int, error) {
	var n int64
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		for _, pr := range prs {
			res, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND status IN (?, ?, ?)`,
				StatusQueued, l.Key.Tenant, l.Key.Repo, pr, StatusEvaluating, StatusGatePassed, StatusBlocked)
			if err != nil {
				return fmt.Errorf("%s: recheck #%d: %w", l.Key, pr, err)
			}
			m, _ := res.RowsAffected()
			n += m
		}
		return nil
	})
	return int(n), err
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
// head sha, and when, so it is asked once per head, not on every pass (and
// again only when the update has not come after a while:
// rules.UpdatePatience).
func (s *Store) MarkBranchUpdated(ctx context.Context, l *Lease, pr int, sha, base string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		at := int64(0)
		if sha != "" {
			at = now
		}
		_, err := tx.ExecContext(ctx, `UPDATE queue SET branch_updated_sha = ?, branch_updated_at = ?, base_ref = CASE WHEN ? != '' THEN ? ELSE base_ref END
			WHERE tenant = ? AND repo = ? AND pr_number = ?`, sha, at, base, base, l.Key.Tenant, l.Key.Repo, pr)
		if err != nil {
			return fmt.Errorf("%s: branch update of #%d: %w", l.Key, pr, err)
		}
		return nil
	})
}

// SetConsent records what a writer's consent to pr covers now (consent, a
// head sha or NoConsent) and why it does not cover its head (note; "" when
// it does), as rules.ConsentAfter decided; the entry is read again at the
// next sync (held, it may go on now). It reports whether pr is queued.
func (s *Store) SetConsent(ctx context.Context, l *Lease, pr int, consent, note string) (queued bool, err error) {
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		res, err := tx.ExecContext(ctx, `UPDATE queue SET consent_sha = ?, consent_note = ?,
				status = CASE WHEN status IN ('evaluating', 'gate_passed', 'blocked') THEN 'queued' ELSE status END
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != ?`,
			consent, note, l.Key.Tenant, l.Key.Repo, pr, StatusBounced)
		if err != nil {
			return fmt.Errorf("%s: consent of #%d: %w", l.Key, pr, err)
		}
		n, _ := res.RowsAffected()
		queued = n > 0
		return nil
	})
	return queued, err
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
