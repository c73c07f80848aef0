package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// StoredPolicy is a repository's policy file as last read (repo_policy).
type StoredPolicy struct {
	Key
	Source   string // repository, organisation or defaults
	File     string // owner/name:path of the file in force
	SHA      string
	Content  string // the file in force's text
	BadSHA   string // the latest read's file, when it had problems
	Problems string // JSON, as package policy writes it
	ReadAt   int64
	Stale    bool // a push touched the file: read it again
}

// Policies returns every stored policy (read at start).
func (s *Store) Policies(ctx context.Context) ([]StoredPolicy, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT tenant, repo, source, file, sha, content, bad_sha, problems, read_at, stale FROM repo_policy`)
	if err != nil {
		return nil, fmt.Errorf("read policies: %w", err)
	}
	defer rows.Close()
	var out []StoredPolicy
	for rows.Next() {
		var p StoredPolicy
		if err := rows.Scan(&p.Tenant, &p.Repo, &p.Source, &p.File, &p.SHA, &p.Content, &p.BadSHA, &p.Problems, &p.ReadAt, &p.Stale); err != nil {
			return nil, fmt.Errorf("read policies: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// Policy returns k's stored policy; ok is false when none is stored.
func (s *Store) Policy(ctx context.Context, k Key) (p StoredPolicy, ok bool, err error) {
	err = s.db.r.QueryRowContext(ctx, `SELECT tenant, repo, source, file, sha, content, bad_sha, problems, read_at, stale
		FROM repo_policy WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo).
		Scan(&p.Tenant, &p.Repo, &p.Source, &p.File, &p.SHA, &p.Content, &p.BadSHA, &p.Problems, &p.ReadAt, &p.Stale)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredPolicy{}, false, nil
	}
	if err != nil {
		return StoredPolicy{}, false, fmt.Errorf("%s: read policy: %w", k, err)
	}
	return p, true, nil
}

// SavePolicy stores what a read of k's policy file found (stale cleared).
func (s *Store) SavePolicy(ctx context.Context, p StoredPolicy) error {
	return s.db.write(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO repo_policy (tenant, repo, source, file, sha, content, bad_sha, problems, read_at, stale)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
			ON CONFLICT (tenant, repo) DO UPDATE SET source = excluded.source, file = excluded.file, sha = excluded.sha,
				content = excluded.content, bad_sha = excluded.bad_sha, problems = excluded.problems, read_at = excluded.read_at, stale = 0`,
			p.Tenant, p.Repo, p.Source, p.File, p.SHA, p.Content, p.BadSHA, p.Problems, s.now().UnixMilli())
		if err != nil {
			return fmt.Errorf("%s: save policy: %w", p.Key, err)
		}
		return nil
	})
}

// markPolicyStale: a push touched k's policy file (applied with the
// delivery, OpPolicy). A push to an organisation's .github repository
// marks every repository of that owner in the installation: its file is
// their fallback.
func markPolicyStale(ctx context.Context, tx *wtx, k Key) error {
	owner, name, _ := strings.Cut(k.Repo, "/")
	if _, err := tx.ExecContext(ctx, `UPDATE repo_policy SET stale = 1 WHERE tenant = ? AND (repo = ? OR (? != 0 AND substr(repo, 1, ?) = ?))`,
		k.Tenant, k.Repo, name == ".github", len(owner)+1, owner+"/"); err != nil {
		return fmt.Errorf("%s: mark policy stale: %w", k, err)
	}
	return nil
}

// Freeze is a freeze set from the admin API.
type Freeze struct {
	Branch   string `json:"branch,omitempty"` // "" for the whole repository
	Message  string `json:"message"`
	By       string `json:"by"`
	FrozenAt int64  `json:"frozenAt"`
}

// Freezes returns k's freezes, the repository's first.
func (s *Store) Freezes(ctx context.Context, k Key) ([]Freeze, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT branch, message, frozen_by, frozen_at FROM freezes
		WHERE tenant = ? AND repo = ? ORDER BY branch`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read freezes: %w", k, err)
	}
	defer rows.Close()
	out := []Freeze{}
	for rows.Next() {
		var f Freeze
		if err := rows.Scan(&f.Branch, &f.Message, &f.By, &f.FrozenAt); err != nil {
			return nil, fmt.Errorf("%s: read freezes: %w", k, err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Audit actions of freezes.
const (
	AuditFreeze = "freeze"
	AuditThaw   = "thaw"
)

// SetFreeze freezes k (branch "": the whole repository) or thaws it
// (frozen false), with who and why in the audit log. It reports whether
// anything changed (thawing what is not frozen does not).
func (s *Store) SetFreeze(ctx context.Context, k Key, branch string, frozen bool, message, by string) (changed bool, err error) {
	err = s.db.write(ctx, func(tx *wtx) error {
		now := s.now().UnixMilli()
		where := "repository"
		if branch != "" {
			where = "base branch " + branch
		}
		var res sql.Result
		var reason string
		if frozen {
			res, err = tx.ExecContext(ctx, `INSERT INTO freezes (tenant, repo, branch, message, frozen_by, frozen_at) VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (tenant, repo, branch) DO UPDATE SET message = excluded.message, frozen_by = excluded.frozen_by, frozen_at = excluded.frozen_at
				WHERE freezes.message != excluded.message`, k.Tenant, k.Repo, branch, message, by, now)
			reason = fmt.Sprintf("%s frozen by %s: %s", where, by, message)
		} else {
			res, err = tx.ExecContext(ctx, `DELETE FROM freezes WHERE tenant = ? AND repo = ? AND branch = ?`, k.Tenant, k.Repo, branch)
			reason = fmt.Sprintf("%s thawed by %s", where, by)
			if message != "" {
				reason += ": " + message
			}
		}
		if err != nil {
			return fmt.Errorf("%s: freeze: %w", k, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		changed = true
		action := AuditThaw
		if frozen {
			action = AuditFreeze
		}
		if err := insertAudit(ctx, tx, k, now, action, 0, "", reason); err != nil {
			return err
		}
		// Every entry is read again: its check run says the freeze.
		_, err = tx.ExecContext(ctx, `UPDATE queue SET status = ? WHERE tenant = ? AND repo = ? AND status IN (?, ?)`,
			StatusQueued, k.Tenant, k.Repo, StatusGatePassed, StatusEvaluating)
		return err
	})
	return changed, err
}

// SetPriority sets pr's rank in its base's queue (higher first) and the
// word its check run shows. It reports whether it changed.
func (s *Store) SetPriority(ctx context.Context, l *Lease, pr, rank int, name string) (changed bool, err error) {
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		res, err := tx.ExecContext(ctx, `UPDATE queue SET priority = ?, priority_name = ?
			WHERE tenant = ? AND repo = ? AND pr_number = ? AND (priority != ? OR priority_name != ?)`,
			rank, name, l.Key.Tenant, l.Key.Repo, pr, rank, name)
		if err != nil {
			return fmt.Errorf("%s: priority of #%d: %w", l.Key, pr, err)
		}
		n, _ := res.RowsAffected()
		changed = n > 0
		return nil
	})
	return changed, err
}

// Command is a "@mergegate ..." command from a comment, waiting for the
// repository's next sync.
type Command struct {
	ID        int64
	PRNumber  int
	CommentID int64
	Author    string
	Command   string // queue, cancel, refresh, priority, or label (who added the trigger label)
	Arg       string
	// CreatedAt is when the command was made (epoch ms): its comment's
	// time, as GitHub gives it, or else when it was stored.
	CreatedAt int64
}

func insertCommand(ctx context.Context, tx *wtx, k Key, pr int, d *Details, now int64) error {
	if pr <= 0 || d.Command == "" {
		return &FieldError{Field: "details.command", Msg: "and prNumber are required for a command"}
	}
	made := now
	if d.CommentedAt > 0 {
		made = d.CommentedAt
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO commands (tenant, repo, pr_number, comment_id, author, command, arg, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, k.Tenant, k.Repo, pr, d.CommentID, d.By, d.Command, d.Arg, made); err != nil {
		return fmt.Errorf("%s: store command: %w", k, err)
	}
	return nil
}

// Commands returns k's waiting commands, oldest first.
func (s *Store) Commands(ctx context.Context, k Key) ([]Command, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT id, pr_number, comment_id, author, command, arg, created_at FROM commands
		WHERE tenant = ? AND repo = ? ORDER BY id LIMIT 50`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read commands: %w", k, err)
	}
	defer rows.Close()
	var out []Command
	for rows.Next() {
		var c Command
		if err := rows.Scan(&c.ID, &c.PRNumber, &c.CommentID, &c.Author, &c.Command, &c.Arg, &c.CreatedAt); err != nil {
			return nil, fmt.Errorf("%s: read commands: %w", k, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// CommandDone deletes a command carried out (or refused), with what was
// done in the audit log ("" writes none: nothing was done).
func (s *Store) CommandDone(ctx context.Context, l *Lease, c Command, outcome string) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		if err := deleteCommand(ctx, tx, l.Key, c); err != nil {
			return err
		}
		if outcome == "" {
			return nil
		}
		return insertAudit(ctx, tx, l.Key, now, AuditCommand, c.PRNumber, "", outcome)
	})
}

// deleteCommand deletes c, carried out.
func deleteCommand(ctx context.Context, tx *wtx, k Key, c Command) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM commands WHERE id = ? AND tenant = ? AND repo = ?`, c.ID, k.Tenant, k.Repo); err != nil {
		return fmt.Errorf("%s: command done: %w", k, err)
	}
	return nil
}

// HeadSeen is what mergegate keeps of a head of a pull request not in the
// queue that a delivery told of (a push, a reopening, a base change).
type HeadSeen struct {
	By string // who moved it: the delivery's sender
	At int64  // when mergegate learnt of it (epoch ms): its command was stored
}

// HeadSeenKept is how long a HeadSeen is kept: longer than a command may
// take to consent to a head it did not know before (rules.QueueLag).
const HeadSeenKept = 10 * time.Minute

// SeeHead carries out c, the head move of a pull request not in the
// queue to sha: keeps sha's HeadSeen (by c's author, at c's time) and
// deletes c, in one transaction, with k's HeadSeens older than
// HeadSeenKept.
func (s *Store) SeeHead(ctx context.Context, l *Lease, c Command, sha string) error {
	k := l.Key
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		if err := deleteCommand(ctx, tx, k, c); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM head_seen WHERE tenant = ? AND repo = ? AND seen_at < ?`,
			k.Tenant, k.Repo, now-HeadSeenKept.Milliseconds()); err != nil {
			return fmt.Errorf("%s: prune heads seen: %w", k, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO head_seen (tenant, repo, pr_number, sha, moved_by, seen_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, repo, pr_number, sha) DO UPDATE SET moved_by = excluded.moved_by, seen_at = excluded.seen_at`,
			k.Tenant, k.Repo, c.PRNumber, sha, c.Author, c.CreatedAt); err != nil {
			return fmt.Errorf("%s: head seen of #%d: %w", k, c.PRNumber, err)
		}
		return nil
	})
}

// HeadSeenOf returns what is kept of pr's head sha (ok false: nothing).
func (s *Store) HeadSeenOf(ctx context.Context, k Key, pr int, sha string) (h HeadSeen, ok bool, err error) {
	err = s.db.r.QueryRowContext(ctx, `SELECT moved_by, seen_at FROM head_seen WHERE tenant = ? AND repo = ? AND pr_number = ? AND sha = ?`,
		k.Tenant, k.Repo, pr, sha).Scan(&h.By, &h.At)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return h, false, nil
	case err != nil:
		return h, false, fmt.Errorf("%s: head seen of #%d: %w", k, pr, err)
	}
	return h, true, nil
}

// AuditCommand records a comment command carried out or refused.
const AuditCommand = "command"

// AddCommand stores a command for the next sync under l (the cron's
// resync: who added the trigger label of a pull request it joined).
func (s *Store) AddCommand(ctx context.Context, l *Lease, c Command) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		return insertCommand(ctx, tx, l.Key, c.PRNumber, &Details{Command: c.Command, Arg: c.Arg, By: c.Author, CommentID: c.CommentID}, now)
	})
}

// SyncMarks is what a sync of a repository reads before it starts, in one
// query: whether its policy file is to be read again (stale, or never
// stored) and whether commands wait.
type SyncMarks struct {
	PolicyStored, PolicyStale, Commands bool
}

// Marks reads k's SyncMarks.
func (s *Store) Marks(ctx context.Context, k Key) (SyncMarks, error) {
	var stale int
	var m SyncMarks
	err := s.db.r.QueryRowContext(ctx, `SELECT coalesce((SELECT stale FROM repo_policy WHERE tenant = ? AND repo = ?), -1),
			EXISTS (SELECT 1 FROM commands WHERE tenant = ? AND repo = ?)`, k.Tenant, k.Repo, k.Tenant, k.Repo).Scan(&stale, &m.Commands)
	if err != nil {
		return m, fmt.Errorf("%s: read sync marks: %w", k, err)
	}
	m.PolicyStored, m.PolicyStale = stale >= 0, stale == 1
	return m, nil
}
