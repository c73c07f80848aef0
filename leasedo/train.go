package leasedo

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// Groups returns k's train groups, by base and then in landing order.
func (s *Store) Groups(ctx context.Context, k Key) ([]Group, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT id, base, seq, state, prs, parent_sha, head_sha, attempt, split, own, built_at, reason
		FROM train_groups WHERE tenant = ? AND repo = ? ORDER BY base, seq, id`, k.Tenant, k.Repo)
	if err != nil {
		return nil, fmt.Errorf("%s: read train groups: %w", k, err)
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		var prs string
		if err := rows.Scan(&g.ID, &g.Base, &g.Seq, &g.State, &prs, &g.Parent, &g.Head, &g.Attempt, &g.Split, &g.Own, &g.BuiltAt, &g.Reason); err != nil {
			return nil, fmt.Errorf("%s: read train groups: %w", k, err)
		}
		if err := json.Unmarshal([]byte(prs), &g.PRs); err != nil {
			return nil, fmt.Errorf("%s: train group %d: members: %w", k, g.ID, err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// LandedOn returns what mergegate left on base after its last landing
// (zero when it has landed nothing there).
func (s *Store) LandedOn(ctx context.Context, k Key, base string) (Landed, error) {
	var l Landed
	var recent string
	err := s.db.r.QueryRowContext(ctx, `SELECT tip, tested, recent FROM train_landed WHERE tenant = ? AND repo = ? AND base = ?`,
		k.Tenant, k.Repo, base).Scan(&l.Tip, &l.Tested, &recent)
	if errors.Is(err, sql.ErrNoRows) {
		return Landed{}, nil
	}
	if err == nil {
		err = json.Unmarshal([]byte(recent), &l.Recent)
	}
	if err != nil {
		return Landed{}, fmt.Errorf("%s: read landed tip of %s: %w", k, base, err)
	}
	return l, nil
}

// PlanGroups inserts planned groups of base with these members at
// position at of its train (the groups from at on move back to make
// room), or behind the last one (at < 0), and returns them. split marks
// groups made by bisection.
func (s *Store) PlanGroups(ctx context.Context, l *Lease, base string, at int, members [][]GroupPR, split bool) ([]Group, error) {
	var out []Group
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		var err error
		out, err = planGroups(ctx, tx, l.Key, base, at, members, split, now)
		return err
	})
	return out, err
}

func planGroups(ctx context.Context, tx *wtx, k Key, base string, at int, members [][]GroupPR, split bool, now int64) ([]Group, error) {
	seq := at
	if at < 0 {
		var last sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT MAX(seq) FROM train_groups WHERE tenant = ? AND repo = ? AND base = ?`,
			k.Tenant, k.Repo, base).Scan(&last); err != nil {
			return nil, fmt.Errorf("%s: plan train group: %w", k, err)
		}
		seq = int(last.Int64) + 1
	} else if _, err := tx.ExecContext(ctx, `UPDATE train_groups SET seq = seq + ? WHERE tenant = ? AND repo = ? AND base = ? AND seq >= ?`,
		len(members), k.Tenant, k.Repo, base, at); err != nil {
		return nil, fmt.Errorf("%s: plan train group: %w", k, err)
	}
	var out []Group
	for _, m := range members {
		prs, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		// RETURNING: PostgreSQL has no last rowid; SQLite takes it too.
		var id int64
		err = tx.QueryRowContext(ctx, `INSERT INTO train_groups (tenant, repo, base, seq, state, prs, split, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, k.Tenant, k.Repo, base, seq, GroupPlanned, string(prs), split, now).Scan(&id)
		if err != nil {
			return nil, fmt.Errorf("%s: plan train group: %w", k, err)
		}
		out = append(out, Group{ID: id, Base: base, Seq: seq, State: GroupPlanned, PRs: m, Split: split})
		seq++
	}
	return out, nil
}

// SaveGroup writes g's state, members, commits, attempt and reason (its
// id, base and position stay). It is how a group moves: stored before each
// GitHub call that depends on it.
func (s *Store) SaveGroup(ctx context.Context, l *Lease, g Group) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error { return saveGroup(ctx, tx, l.Key, g) })
}

func saveGroup(ctx context.Context, tx *wtx, k Key, g Group) error {
	prs, err := json.Marshal(g.PRs)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE train_groups SET state = ?, prs = ?, parent_sha = ?, head_sha = ?, attempt = ?, split = ?, own = ?, built_at = ?, reason = ?
		WHERE id = ? AND tenant = ? AND repo = ?`,
		g.State, string(prs), g.Parent, g.Head, g.Attempt, g.Split, g.Own, g.BuiltAt, g.Reason, g.ID, k.Tenant, k.Repo)
	if err != nil {
		return fmt.Errorf("%s: save train group %d: %w", k, g.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: save train group %d: %w", k, g.ID, ErrNoGroup)
	}
	return nil
}

// SplitGroup splits g into a group of one per member, in one transaction
// (a restart finds either g or its pieces), and returns the pieces ahead
// of g. g keeps its last member, its branch, state and result (the last
// step of its build is its head), now built on the step before; the
// others are planned ahead of it, each to be tested at its own step
// (GroupPR.Onto, Merged). A g that is planned has every piece built.
// g keeps its attempts: its last piece is not run again.
func (s *Store) SplitGroup(ctx context.Context, l *Lease, g Group) ([]Group, error) {
	var out []Group
	err := s.underLease(ctx, l, func(tx *wtx, now int64) error {
		n := len(g.PRs) - 1
		pieces := make([][]GroupPR, n)
		for i, m := range g.PRs[:n] {
			pieces[i] = []GroupPR{m}
		}
		var err error
		if out, err = planGroups(ctx, tx, l.Key, g.Base, g.Seq, pieces, true, now); err != nil {
			return err
		}
		last := g.PRs[n]
		g.PRs, g.Split = []GroupPR{last}, true
		if g.Built() {
			g.Parent = last.Onto
		}
		return saveGroup(ctx, tx, l.Key, g)
	})
	return out, err
}

// ErrNoGroup: the train group is gone (landed, dropped or forgotten).
var ErrNoGroup = errors.New("no such train group")

// DeleteGroup removes a group (its branch is the caller's to delete).
func (s *Store) DeleteGroup(ctx context.Context, l *Lease, id int64) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM train_groups WHERE id = ? AND tenant = ? AND repo = ?`, id, l.Key.Tenant, l.Key.Repo)
		if err != nil {
			return fmt.Errorf("%s: delete train group %d: %w", l.Key, id, err)
		}
		return nil
	})
}

// LandGroup records in one transaction that g landed: each member is
// merged (removed from the queue with audit merge, reason how, and its
// check run ended with end), the group is gone, and the base is recorded
// as landed.
func (s *Store) LandGroup(ctx context.Context, l *Lease, g Group, landed Landed, how string, end func(GroupPR) CheckRunEnd) error {
	return s.underLease(ctx, l, func(tx *wtx, now int64) error {
		// The members' audit says how the group landed and how long its CI
		// took (the dashboard's picture of the trains' CI time reads it).
		reason := how
		if g.BuiltAt > 0 && now >= g.BuiltAt {
			reason = fmt.Sprintf("%s, train group %d after %s of CI", how, g.ID, (time.Duration(now-g.BuiltAt) * time.Millisecond).Round(time.Second))
		}
		for _, m := range g.PRs {
			if err := mergedEntry(ctx, tx, l.Key, m.Number, m.SHA, reason, now, end(m)); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM train_groups WHERE id = ? AND tenant = ? AND repo = ?`, g.ID, l.Key.Tenant, l.Key.Repo); err != nil {
			return fmt.Errorf("%s: land train group %d: %w", l.Key, g.ID, err)
		}
		var recent []lifecycle.LandedPR
		var was string
		err := tx.QueryRowContext(ctx, `SELECT recent FROM train_landed WHERE tenant = ? AND repo = ? AND base = ?`,
			l.Key.Tenant, l.Key.Repo, g.Base).Scan(&was)
		if err == nil {
			err = json.Unmarshal([]byte(was), &recent)
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%s: land train group %d: %w", l.Key, g.ID, err)
		}
		for _, m := range g.PRs {
			recent = append(recent, lifecycle.LandedPR{Number: m.Number, At: now})
		}
		recent = recent[max(0, len(recent)-lifecycle.RecentLanded):]
		buf, err := json.Marshal(recent)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO train_landed (tenant, repo, base, tip, tested, recent) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, repo, base) DO UPDATE SET tip = excluded.tip, tested = excluded.tested, recent = excluded.recent`,
			l.Key.Tenant, l.Key.Repo, g.Base, landed.Tip, landed.Tested, string(buf)); err != nil {
			return fmt.Errorf("%s: land train group %d: %w", l.Key, g.ID, err)
		}
		return nil
	})
}
