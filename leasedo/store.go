package leasedo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// Config holds the lease's timing rules (docs/lease-protocol.md).
type Config struct {
	TTL   time.Duration // active → stale (default 30 s)
	Dead  time.Duration // stale → dead, force-released by reconcile (default 90 s)
	Clock Clock
}

// Store is the per-(tenant, repo) actor: lease, queue, events, audit and the
// inbox. Every exported method is one short transaction; none is ever held
// across a call to GitHub.
type Store struct {
	db    *DB
	clock Clock
	ttl   time.Duration
	dead  time.Duration

	// beforeApply, when set (tests), runs inside Apply before routing.
	beforeApply func(Event)
	// renewClock, when set (tests), times RunJob's renewals (cluster.go).
	renewClock Clock

	// bodies is how far DropBodies got (inbox.go).
	bodies struct {
		sync.Mutex
		set     bool
		at, seq int64 // the last (processed_at, seq) it went past
	}
}

// NewStore returns a Store over db. Zero durations take the defaults.
//
// A nil Clock or the system clock is, on PostgreSQL, the database
// server's clock (dbClock): leases are judged on the one clock every
// replica reads. A test's clock (any other) is used as given.
func NewStore(db *DB, cfg Config) *Store {
	s := &Store{db: db, clock: cfg.Clock, ttl: cfg.TTL, dead: cfg.Dead}
	if _, system := s.clock.(SystemClock); s.clock == nil || system {
		s.clock = SystemClock{}
		if db.clock != nil {
			s.clock = db.clock
		}
	}
	if s.ttl <= 0 {
		s.ttl = 30 * time.Second
	}
	if s.dead <= 0 {
		s.dead = 90 * time.Second
	}
	return s
}

// DB returns the underlying database.
func (s *Store) DB() *DB { return s.db }

// TTL and Dead report the configured thresholds.
func (s *Store) TTL() time.Duration  { return s.ttl }
func (s *Store) Dead() time.Duration { return s.dead }

func (s *Store) now() time.Time { return s.clock.Now() }

// Result is the answer of POST /event.
type Result struct {
	Result      string `json:"result"`
	QueueLength int    `json:"queueLength"`
}

// ProcessEvent is POST /event: acquire, apply, release. The
// release runs in a deferred call, so it happens on error and on panic too.
// A held lease answers *LockedError and nothing is written.
func (s *Store) ProcessEvent(ctx context.Context, ev Event, by string) (res Result, err error) {
	if err := ev.Validate(); err != nil {
		return Result{}, err
	}
	l, err := s.Acquire(ctx, ev.Key(), by)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		// context.WithoutCancel: release even when the caller's ctx ended.
		if _, rerr := s.Release(context.WithoutCancel(ctx), l); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return s.Apply(ctx, l, ev)
}

// Apply routes one event under a held lease in one transaction: the event is
// written to events (last 100), the queue action performed and audited.
func (s *Store) Apply(ctx context.Context, l *Lease, ev Event) (Result, error) {
	if err := ev.Validate(); err != nil {
		return Result{}, err
	}
	if ev.Key() != l.Key {
		return Result{}, fmt.Errorf("event for %s under the lease of %s", ev.Key(), l.Key)
	}
	var res Result
	err := s.db.write(ctx, func(tx *wtx) error {
		if err := s.fence(ctx, tx, l); err != nil {
			return err
		}
		var err error
		res, err = s.apply(ctx, tx, ev)
		return err
	})
	return res, err
}

// apply applies one event inside a transaction: the event is
// logged, then its Op performed.
func (s *Store) apply(ctx context.Context, tx *wtx, ev Event) (Result, error) {
	if s.beforeApply != nil {
		s.beforeApply(ev)
	}
	k := ev.Key()
	now := s.now().UnixMilli()
	if err := insertEvent(ctx, tx, k, now, ev); err != nil {
		return Result{}, err
	}
	d := ev.Details
	if d == nil {
		d = &Details{}
	}
	var result string
	var err error
	switch ev.Op {
	case OpJoin:
		result, err = joinEntry(ctx, tx, k, ev.PRNumber, d, now)
	case OpLeave:
		result, err = leaveEntry(ctx, tx, k, ev.PRNumber, now, d.Reason)
	case OpReevaluate:
		result, err = reevaluateEntry(ctx, tx, k, ev.PRNumber, d.Sha, d.Base, now, d.Reason)
	case OpRecheck:
		result, err = recheckEntry(ctx, tx, k, ev.PRNumber, d.Sha)
	case OpLabels:
		result, err = labelsEntry(ctx, tx, k, ev.PRNumber, d)
	case OpPolicy:
		result, err = ResultPolicyStale, markPolicyStale(ctx, tx, k)
	case OpCommand:
		result, err = ResultCommand, insertCommand(ctx, tx, k, ev.PRNumber, d, now)
	case OpIgnore:
		result = ResultIgnored
	default:
		return Result{}, fmt.Errorf("%s: %s/%s event has no queue operation (translate it first)", k, ev.EventType, ev.Action)
	}
	if err != nil {
		return Result{}, err
	}
	n, err := queueLength(ctx, tx, k)
	if err != nil {
		return Result{}, err
	}
	return Result{Result: result, QueueLength: n}, nil
}

// joinEntry adds pr to the queue. A PR already queued answers already_queued
// (double-staging prevention). One exception: a bounced entry is replaced by
// a fresh one, so that re-adding the trigger label after a fix rejoins the PR
// instead of waiting for reconcile to sweep the bounced entry.
func joinEntry(ctx context.Context, tx *wtx, k Key, pr int, d *Details, now int64) (string, error) {
	if pr <= 0 {
		return "", &FieldError{Field: "prNumber", Msg: "is required to join"}
	}
	if d.Sha == "" {
		return "", &FieldError{Field: "details.sha", Msg: "is required to join"}
	}
	var live, bounced int
	err := tx.QueryRowContext(ctx, `SELECT
			count(*) FILTER (WHERE status != 'bounced'), count(*) FILTER (WHERE status = 'bounced')
		FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, k.Tenant, k.Repo, pr).Scan(&live, &bounced)
	if err != nil {
		return "", fmt.Errorf("%s: join #%d: %w", k, pr, err)
	}
	if live > 0 {
		if d.Priority != nil {
			if _, err := labelsEntry(ctx, tx, k, pr, d); err != nil {
				return "", err
			}
		}
		if d.Consent == ConsentGiven {
			// A writer consents again: to Sha, the head they saw (an
			// entry still on an older head is gated again; a push it has
			// not seen yet is checked when its delivery comes).
			if _, err := tx.ExecContext(ctx, `UPDATE queue SET consent_sha = ?, consent_note = '',
					status = CASE WHEN status IN ('evaluating', 'gate_passed', 'blocked') THEN 'queued' ELSE status END
				WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != 'bounced'`, d.Sha, k.Tenant, k.Repo, pr); err != nil {
				return "", fmt.Errorf("%s: join #%d: %w", k, pr, err)
			}
		}
		return ResultAlreadyQueued, nil
	}
	if bounced > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, k.Tenant, k.Repo, pr); err != nil {
			return "", fmt.Errorf("%s: join #%d: %w", k, pr, err)
		}
	}
	queuedAt := now
	if d.QueuedAt > 0 {
		queuedAt = d.QueuedAt
	}
	rank := 0
	if d.Priority != nil {
		rank = *d.Priority
	}
	consent := d.Sha
	if d.Consent == ConsentPending {
		consent = NoConsent
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO queue (tenant, repo, pr_number, pr_sha, queued_at, status, base_ref, head_at, merge_method, priority, priority_name, consent_sha)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, k.Tenant, k.Repo, pr, d.Sha, queuedAt, StatusQueued, d.Base, now, d.MergeMethod, rank, d.PriorityName, consent); err != nil {
		return "", fmt.Errorf("%s: join #%d: %w", k, pr, err)
	}
	if err := insertAudit(ctx, tx, k, now, AuditJoin, pr, d.Sha, d.Reason); err != nil {
		return "", err
	}
	return ResultJoined, nil
}

// labelsEntry takes a live entry's new priority (when given) and marks it
// to be read again (a blocking label may have come or gone). A PR not
// queued is ignored.
func labelsEntry(ctx context.Context, tx *wtx, k Key, pr int, d *Details) (string, error) {
	q := `UPDATE queue SET status = CASE WHEN status IN ('evaluating', 'gate_passed', 'blocked') THEN 'queued' ELSE status END`
	args := []any{}
	if d.Priority != nil {
		q += `, priority = ?, priority_name = ?`
		args = append(args, *d.Priority, d.PriorityName)
	}
	q += ` WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != 'bounced'`
	res, err := tx.ExecContext(ctx, q, append(args, k.Tenant, k.Repo, pr)...)
	if err != nil {
		return "", fmt.Errorf("%s: labels of #%d: %w", k, pr, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ResultIgnored, nil
	}
	return ResultGateRecorded, nil
}

// leaveEntry takes pr out of the queue: a PR not in the queue leaves silently.
// A bounced entry leaves too (its check run was ended when it bounced).
// The entry's check run is ended with the reason (the outbox).
func leaveEntry(ctx context.Context, tx *wtx, k Key, pr int, now int64, reason string) (string, error) {
	var sha, status string
	var runID int64
	err := tx.QueryRowContext(ctx, `SELECT pr_sha, status, check_run_id FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? ORDER BY queued_at, id LIMIT 1`,
		k.Tenant, k.Repo, pr).Scan(&sha, &status, &runID)
	if errors.Is(err, sql.ErrNoRows) {
		return ResultLeft, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: leave #%d: %w", k, pr, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ?`, k.Tenant, k.Repo, pr); err != nil {
		return "", fmt.Errorf("%s: leave #%d: %w", k, pr, err)
	}
	if status != StatusBounced && runID != 0 {
		if err := endCheckRun(ctx, tx, k, pr, sha, runID, now, CheckRunEnd{Conclusion: "neutral",
			Title: "Left the merge queue", Summary: leftSummary(reason)}); err != nil {
			return "", err
		}
	}
	if err := insertAudit(ctx, tx, k, now, AuditLeave, pr, sha, reason); err != nil {
		return "", err
	}
	return ResultLeft, nil
}

func leftSummary(reason string) string {
	if reason == "" {
		return "This pull request left the merge queue."
	}
	return "This pull request left the merge queue: " + reason + "."
}

// reevaluateEntry takes a queued PR's new head or base: new prSha (or base_ref),
// reevaluatedAt, status back to queued, gate fields cleared. A new head ends
// the old head's check run; a new base keeps the run (same commit) and its
// title is rewritten by the next sync. A PR not queued (or bounced) is
// ignored.
func reevaluateEntry(ctx context.Context, tx *wtx, k Key, pr int, sha, base string, now int64, reason string) (string, error) {
	if pr <= 0 {
		return "", &FieldError{Field: "prNumber", Msg: "is required to reevaluate"}
	}
	if sha == "" {
		return "", &FieldError{Field: "details.sha", Msg: "is required to reevaluate"}
	}
	var oldSha, updatedSha string
	var runID int64
	err := tx.QueryRowContext(ctx, `SELECT pr_sha, check_run_id, branch_updated_sha FROM queue WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != ? ORDER BY queued_at, id LIMIT 1`,
		k.Tenant, k.Repo, pr, StatusBounced).Scan(&oldSha, &runID, &updatedSha)
	if errors.Is(err, sql.ErrNoRows) {
		return ResultIgnored, nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: reevaluate #%d: %w", k, pr, err)
	}
	if oldSha != sha {
		// A new head from mergegate's own update of the branch (it asked
		// for one at oldSha) keeps no run of its own: the old head's run
		// ends saying where it went (NoCheckRun).
		ownUpdate := updatedSha == oldSha
		next := int64(0)
		end := CheckRunEnd{Conclusion: "neutral", Title: "Superseded by a new commit", Summary: "New commits were pushed; mergegate checks the new head."}
		if ownUpdate {
			next = NoCheckRun
			end = CheckRunEnd{Conclusion: "neutral", Title: "Branch updated: continues on " + lifecycle.ShortSHA(sha),
				Summary: "mergegate brought this branch up to date with its base (" + lifecycle.ShortSHA(sha) + "). The pull request keeps its place; " +
					"it merges when the new commit's required checks pass. Its place in the queue: the dashboard."}
		}
		if runID > 0 {
			if err := endCheckRun(ctx, tx, k, pr, oldSha, runID, now, end); err != nil {
				return "", err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE queue SET pr_sha = ?, head_at = ?, check_run_id = ?, check_title = '',
				base_ref = CASE WHEN ? != '' THEN ? ELSE base_ref END, reevaluated_at = ?, status = ?,
				gate_result = NULL, gate_result_at = NULL, gate_reason = ''
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != ?`,
			sha, now, next, base, base, now, StatusQueued, k.Tenant, k.Repo, pr, StatusBounced)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE queue SET base_ref = CASE WHEN ? != '' THEN ? ELSE base_ref END, reevaluated_at = ?, status = ?,
				gate_result = NULL, gate_result_at = NULL, gate_reason = ''
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND status != ?`,
			base, base, now, StatusQueued, k.Tenant, k.Repo, pr, StatusBounced)
	}
	if err != nil {
		return "", fmt.Errorf("%s: reevaluate #%d: %w", k, pr, err)
	}
	if oldSha != sha {
		// The consent stays on the head it was given on (an older
		// mergegate's '' is pinned to it): the sync moves it to the new
		// head when whoever pushed may write (rules.ConsentAfter).
		if _, err := tx.ExecContext(ctx, `UPDATE queue SET consent_sha = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND consent_sha = '' AND status != ?`,
			oldSha, k.Tenant, k.Repo, pr, StatusBounced); err != nil {
			return "", fmt.Errorf("%s: reevaluate #%d: %w", k, pr, err)
		}
	}
	if err := insertAudit(ctx, tx, k, now, AuditReevaluate, pr, sha, reason); err != nil {
		return "", err
	}
	return ResultReevaluated, nil
}

// recheckEntry marks the queued PR whose head is sha (prNumber, when not 0, must
// match too) to be read again: a check, status or review event. Whatever
// the event says, the gate is read from GitHub: a result in the event only
// starts that reading. An event for a sha that is no head is ignored.
func recheckEntry(ctx context.Context, tx *wtx, k Key, pr int, sha string) (string, error) {
	if sha == "" {
		return ResultIgnored, nil
	}
	e, err := entryBySha(ctx, tx, k, sha, pr)
	if err != nil || e == nil {
		if err == nil {
			return ResultIgnored, nil
		}
		return "", err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND pr_number = ? AND pr_sha = ? AND status != ?`,
		StatusQueued, k.Tenant, k.Repo, e.PRNumber, sha, StatusBounced); err != nil {
		return "", fmt.Errorf("%s: recheck #%d: %w", k, e.PRNumber, err)
	}
	return ResultGateRecorded, nil
}

func entryBySha(ctx context.Context, q querier, k Key, sha string, pr int) (*Entry, error) {
	query := `SELECT pr_number, pr_sha, queued_at, status FROM queue
		WHERE tenant = ? AND repo = ? AND pr_sha = ? AND status != 'bounced'`
	args := []any{k.Tenant, k.Repo, sha}
	if pr > 0 {
		query += ` AND pr_number = ?`
		args = append(args, pr)
	}
	query += ` ORDER BY queued_at, id LIMIT 1`
	var e Entry
	err := q.QueryRowContext(ctx, query, args...).Scan(&e.PRNumber, &e.PRSha, &e.QueuedAt, &e.Status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: find entry for sha %s: %w", k, sha, err)
	}
	return &e, nil
}

func insertEvent(ctx context.Context, tx *wtx, k Key, now int64, ev Event) error {
	var details any
	if ev.Details != nil {
		b, err := json.Marshal(ev.Details)
		if err != nil {
			return fmt.Errorf("%s: encode details: %w", k, err)
		}
		details = string(b)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO events (tenant, repo, ts, event_type, action, pr_number, details) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.Tenant, k.Repo, now, ev.EventType, ev.Action, ev.PRNumber, details); err != nil {
		return fmt.Errorf("%s: write event: %w", k, err)
	}
	// Keep the last EventCap rows of this (tenant, repo).
	if _, err := tx.ExecContext(ctx, `DELETE FROM events WHERE tenant = ? AND repo = ? AND id <=
			(SELECT id FROM events WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		k.Tenant, k.Repo, k.Tenant, k.Repo, EventCap); err != nil {
		return fmt.Errorf("%s: cap events: %w", k, err)
	}
	return nil
}

func insertAudit(ctx context.Context, tx *wtx, k Key, now int64, action string, pr int, sha, reason string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit (tenant, repo, ts, action, pr_number, pr_sha, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.Tenant, k.Repo, now, action, pr, sha, reason); err != nil {
		return fmt.Errorf("%s: write audit: %w", k, err)
	}
	// Keep the last AuditCap rows of this (tenant, repo).
	if _, err := tx.ExecContext(ctx, `DELETE FROM audit WHERE tenant = ? AND repo = ? AND id <=
			(SELECT id FROM audit WHERE tenant = ? AND repo = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`,
		k.Tenant, k.Repo, k.Tenant, k.Repo, AuditCap); err != nil {
		return fmt.Errorf("%s: cap audit: %w", k, err)
	}
	return nil
}

func queueLength(ctx context.Context, q querier, k Key) (int, error) {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM queue WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: queue length: %w", k, err)
	}
	return n, nil
}
