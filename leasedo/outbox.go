package leasedo

import (
	"context"
	"fmt"
	"strings"
)

// NoCheckRun is a queue entry's check_run_id when its head is to have no
// run of its own: mergegate's own update of the branch made it, and the
// run of the head before it was concluded saying so (a run per head would
// cost two more writes per merged pull request on a strict base).
const NoCheckRun int64 = -1

// CheckRunToEnd is a mergegate check run waiting to be completed on GitHub.
// CheckRunID 0: none was created; the run is created completed.
type CheckRunToEnd struct {
	ID         int64
	PRNumber   int
	Sha        string
	CheckRunID int64
	CheckRunEnd
}

// endCheckRun queues the end of pr's check run in the transition's own
// transaction. A leave or new head without a run has nothing to end; a
// merge or bounce without one still gets a completed run that says so.
func endCheckRun(ctx context.Context, tx *wtx, k Key, pr int, sha string, runID, now int64, end CheckRunEnd) error {
	if end.Conclusion == "" {
		return nil
	}
	if runID == NoCheckRun {
		if end.Comment == "" && len(end.Unlabel) == 0 && end.Conclusion == "success" {
			return nil // merged: the pull request says so, and its head has no run to end
		}
		runID = 0 // a bounce or a leave: a completed run on the head says why
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO check_outbox (tenant, repo, pr_number, sha, check_run_id, conclusion, title, summary, comment, unlabel, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.Tenant, k.Repo, pr, sha, runID, end.Conclusion, end.Title, end.Summary,
		end.Comment, strings.Join(end.Unlabel, "\n"), now); err != nil {
		return fmt.Errorf("%s: end check run of #%d: %w", k, pr, err)
	}
	return nil
}

// CheckRunsToEnd lists k's check runs waiting to be completed, oldest first.
func (s *Store) CheckRunsToEnd(ctx context.Context, k Key) ([]CheckRunToEnd, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT id, pr_number, sha, check_run_id, conclusion, title, summary, comment, unlabel
		FROM check_outbox WHERE tenant = ? AND repo = ? ORDER BY id`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read check runs to end: %w", k, err)
	}
	defer rows.Close()
	var out []CheckRunToEnd
	for rows.Next() {
		var c CheckRunToEnd
		var unlabel string
		if err := rows.Scan(&c.ID, &c.PRNumber, &c.Sha, &c.CheckRunID, &c.Conclusion, &c.Title, &c.Summary, &c.Comment, &unlabel); err != nil {
			return nil, fmt.Errorf("%s: read check runs to end: %w", k, err)
		}
		if unlabel != "" {
			c.Unlabel = strings.Split(unlabel, "\n")
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// OutboxCommented records that an outbox row's comment was posted (and,
// with labels, its labels taken off), so that a retry of the ending does
// not post it twice.
func (s *Store) OutboxCommented(ctx context.Context, l *Lease, id int64, labels bool) error {
	q := `UPDATE check_outbox SET comment = '' WHERE tenant = ? AND repo = ? AND id = ?`
	if labels {
		q = `UPDATE check_outbox SET comment = '', unlabel = '' WHERE tenant = ? AND repo = ? AND id = ?`
	}
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, q, l.Key.Tenant, l.Key.Repo, id)
		if err != nil {
			return fmt.Errorf("%s: outbox comment posted: %w", l.Key, err)
		}
		return nil
	})
}

// CheckRunEnded removes an outbox row once GitHub has the completed run.
func (s *Store) CheckRunEnded(ctx context.Context, l *Lease, id int64) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM check_outbox WHERE tenant = ? AND repo = ? AND id = ?`, l.Key.Tenant, l.Key.Repo, id)
		if err != nil {
			return fmt.Errorf("%s: check run ended: %w", l.Key, err)
		}
		return nil
	})
}
