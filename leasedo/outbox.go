package leasedo

import (
	"context"
	"fmt"
)

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
	if _, err := tx.ExecContext(ctx, `INSERT INTO check_outbox (tenant, repo, pr_number, sha, check_run_id, conclusion, title, summary, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.Tenant, k.Repo, pr, sha, runID, end.Conclusion, end.Title, end.Summary, now); err != nil {
		return fmt.Errorf("%s: end check run of #%d: %w", k, pr, err)
	}
	return nil
}

// CheckRunsToEnd lists k's check runs waiting to be completed, oldest first.
func (s *Store) CheckRunsToEnd(ctx context.Context, k Key) ([]CheckRunToEnd, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT id, pr_number, sha, check_run_id, conclusion, title, summary
		FROM check_outbox WHERE tenant = ? AND repo = ? ORDER BY id`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read check runs to end: %w", k, err)
	}
	defer rows.Close()
	var out []CheckRunToEnd
	for rows.Next() {
		var c CheckRunToEnd
		if err := rows.Scan(&c.ID, &c.PRNumber, &c.Sha, &c.CheckRunID, &c.Conclusion, &c.Title, &c.Summary); err != nil {
			return nil, fmt.Errorf("%s: read check runs to end: %w", k, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
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
