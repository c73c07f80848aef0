package leasedo

import (
	"context"
	"fmt"
	"time"
)

// Tracked is one repository mergegate keeps a queue for.
type Tracked struct {
	Key       Key   `json:"key"`
	TrackedAt int64 `json:"trackedAt"`
	Suspended bool  `json:"suspended"`
}

// Tracked lists the tracked repositories, with their installation's
// suspension, ordered by tenant and repo.
func (s *Store) Tracked(ctx context.Context) ([]Tracked, error) {
	rows, err := s.db.r.QueryContext(ctx, `SELECT r.tenant, r.repo, r.tracked_at, coalesce(i.suspended, 0)
		FROM repos r LEFT JOIN installations i ON i.tenant = r.tenant ORDER BY r.tenant, r.repo`)
	if err != nil {
		return nil, fmt.Errorf("list tracked repositories: %w", err)
	}
	defer rows.Close()
	var out []Tracked
	for rows.Next() {
		var t Tracked
		if err := rows.Scan(&t.Key.Tenant, &t.Key.Repo, &t.TrackedAt, &t.Suspended); err != nil {
			return nil, fmt.Errorf("list tracked repositories: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Track adds repositories to the tracked set (idempotent).
func (s *Store) Track(ctx context.Context, keys ...Key) error {
	return s.db.write(ctx, func(tx *wtx) error { return track(ctx, tx, s.now().UnixMilli(), keys) })
}

func track(ctx context.Context, tx *wtx, now int64, keys []Key) error {
	for _, k := range keys {
		if k.Tenant == "" || k.Repo == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO repos (tenant, repo, tracked_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, k.Tenant, k.Repo, now); err != nil {
			return fmt.Errorf("%s: track: %w", k, err)
		}
	}
	return nil
}

// forget drops every row of each key: queue, events, audit, lease, pending
// deliveries (marked done: nothing is left to act on) and the tracking row.
func forget(ctx context.Context, tx *wtx, now int64, keys []Key) error {
	for _, k := range keys {
		for _, q := range []string{
			`DELETE FROM queue WHERE tenant = ? AND repo = ?`,
			`DELETE FROM check_outbox WHERE tenant = ? AND repo = ?`,
			`DELETE FROM events WHERE tenant = ? AND repo = ?`,
			`DELETE FROM audit WHERE tenant = ? AND repo = ?`,
			`DELETE FROM leases WHERE tenant = ? AND repo = ?`,
			`DELETE FROM repos WHERE tenant = ? AND repo = ?`,
			`DELETE FROM repo_policy WHERE tenant = ? AND repo = ?`,
			`DELETE FROM freezes WHERE tenant = ? AND repo = ?`,
			`DELETE FROM commands WHERE tenant = ? AND repo = ?`,
			`DELETE FROM head_seen WHERE tenant = ? AND repo = ?`,
			`DELETE FROM train_groups WHERE tenant = ? AND repo = ?`,
			`DELETE FROM train_landed WHERE tenant = ? AND repo = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, k.Tenant, k.Repo); err != nil {
				return fmt.Errorf("%s: forget: %w", k, err)
			}
		}
		for _, q := range []string{ // one per state: each from its own index
			`UPDATE deliveries SET state = 'done', processed_at = ?, last_error = 'repository forgotten'
				WHERE state = 'pending' AND tenant = ? AND repo = ?`,
			`UPDATE deliveries SET state = 'done', processed_at = ?, last_error = 'repository forgotten'
				WHERE state = 'failed' AND tenant = ? AND repo = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, now, k.Tenant, k.Repo); err != nil {
				return fmt.Errorf("%s: forget deliveries: %w", k, err)
			}
		}
	}
	return nil
}

func tenantRepos(ctx context.Context, tx *wtx, tenant string) ([]Key, error) {
	// Every trace of the tenant's repositories; the tenant-level key (repo
	// "") is left alone: its lease is the caller's.
	rows, err := tx.QueryContext(ctx, `SELECT repo FROM repos WHERE tenant = ?1
		UNION SELECT repo FROM queue WHERE tenant = ?1
		UNION SELECT repo FROM events WHERE tenant = ?1
		UNION SELECT repo FROM audit WHERE tenant = ?1
		UNION SELECT repo FROM leases WHERE tenant = ?1 AND repo != ''
		UNION SELECT repo FROM deliveries WHERE state = 'pending' AND tenant = ?1 AND repo != ''
		UNION SELECT repo FROM deliveries WHERE state = 'failed' AND tenant = ?1 AND repo != ''`, tenant)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: list repositories: %w", tenant, err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, fmt.Errorf("tenant %s: list repositories: %w", tenant, err)
		}
		keys = append(keys, Key{Tenant: tenant, Repo: r})
	}
	return keys, rows.Err()
}

func setSuspended(ctx context.Context, tx *wtx, now int64, tenant string, suspended bool) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO installations (tenant, suspended, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (tenant) DO UPDATE SET suspended = excluded.suspended, updated_at = excluded.updated_at`, tenant, suspended, now)
	if err != nil {
		return fmt.Errorf("tenant %s: suspend=%v: %w", tenant, suspended, err)
	}
	return nil
}

// Suspended reports whether tenant's installation is suspended.
func (s *Store) Suspended(ctx context.Context, tenant string) (bool, error) {
	var n int
	err := s.db.r.QueryRowContext(ctx, `SELECT count(*) FROM installations WHERE tenant = ? AND suspended = 1`, tenant).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("tenant %s: read suspension: %w", tenant, err)
	}
	return n > 0, nil
}

// RepoGauges is what the metrics show of one tracked repository.
type RepoGauges struct {
	Key
	QueueDepth     int
	OldestQueuedAt time.Time  // zero for an empty queue
	Lease          LeaseState // zero: no lease row
}

// Gauges reads every tracked repository's queue depth, oldest queue entry
// and lease, in one snapshot and three queries however many repositories
// are tracked. A metrics scrape read them repository by repository (two
// queries each): 100 repositories cost ~30 ms of a core, once a second
// under the load tool, and the acknowledgements meanwhile waited for it.
func (s *Store) Gauges(ctx context.Context) ([]RepoGauges, error) {
	var out []RepoGauges
	err := s.db.read(ctx, func(tx *wtx) error {
		type queueRow struct {
			depth  int
			oldest int64
		}
		queues := map[Key]queueRow{}
		rows, err := tx.QueryContext(ctx, `SELECT tenant, repo, count(*), min(queued_at) FROM queue GROUP BY tenant, repo`)
		if err != nil {
			return fmt.Errorf("read queue gauges: %w", err)
		}
		for rows.Next() {
			var k Key
			var q queueRow
			if err := rows.Scan(&k.Tenant, &k.Repo, &q.depth, &q.oldest); err != nil {
				rows.Close()
				return fmt.Errorf("read queue gauges: %w", err)
			}
			queues[k] = q
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read queue gauges: %w", err)
		}
		leases := map[Key]leaseRow{}
		if rows, err = tx.QueryContext(ctx, `SELECT tenant, repo, ts, held_by, token FROM leases`); err != nil {
			return fmt.Errorf("read lease gauges: %w", err)
		}
		for rows.Next() {
			var k Key
			var l leaseRow
			if err := rows.Scan(&k.Tenant, &k.Repo, &l.ts, &l.heldBy, &l.token); err != nil {
				rows.Close()
				return fmt.Errorf("read lease gauges: %w", err)
			}
			leases[k] = l
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("read lease gauges: %w", err)
		}
		if rows, err = tx.QueryContext(ctx, `SELECT tenant, repo FROM repos ORDER BY tenant, repo`); err != nil {
			return fmt.Errorf("list tracked repositories: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var g RepoGauges
			if err := rows.Scan(&g.Tenant, &g.Repo); err != nil {
				return fmt.Errorf("list tracked repositories: %w", err)
			}
			if q, ok := queues[g.Key]; ok {
				g.QueueDepth, g.OldestQueuedAt = q.depth, time.UnixMilli(q.oldest)
			}
			if l, ok := leases[g.Key]; ok {
				g.Lease = s.leaseState(&l)
			}
			out = append(out, g)
		}
		return rows.Err()
	})
	return out, err
}
