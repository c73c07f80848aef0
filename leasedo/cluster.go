package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/mergegate/mergegate/migrations"
)

// Several replicas of mergegate on one database (issue 22) share three
// things here: the cron's repositories (each claimed for one period by
// one replica: ClaimReconcile), the singleton jobs (RunJob: under a named
// lease, at most once a period across the cluster), and the replica
// registry (Heartbeat: how many are alive, to share the per-installation
// request limit). Time is the Store's clock: on PostgreSQL the database
// server's, as leases are judged.

// Names of the singleton jobs.
const (
	JobDiscovery = "discovery" // the App's installations and repositories (reconcile)
	JobPrune     = "prune"     // processed deliveries and their bodies (app's engine)
	JobRedeliver = "redeliver" // the redelivery sweep (app)
)

// JobKey is the lease key a singleton job runs under. Its tenant is empty,
// which no installation, tracked repository or admin request has (the
// admin API requires a tenant), so the row never shows up as a
// repository: Tracked, Gauges, the dashboard and the stale-lease sweep all
// start from tracked repositories.
func JobKey(name string) Key { return Key{Tenant: "", Repo: "job:" + name} }

// claimDue is the part of a period after which the next claim wins: a
// replica whose pass starts a little early (its cron started later than
// the last claimer's) still gets the period, instead of skipping it.
func claimDue(now time.Time, every time.Duration) int64 {
	return now.Add(-every * 4 / 5).UnixMilli()
}

// ClaimReconcile claims k's cron pass for the period every, for by: one
// conditional write, won by at most one replica per period (a claim is
// due 4/5 of a period after the last). false: another replica (or this
// one) reconciled it this period, or k is not tracked. every <= 0 always
// wins (and claims).
func (s *Store) ClaimReconcile(ctx context.Context, k Key, by string, every time.Duration) (bool, error) {
	now := s.now()
	var won bool
	err := s.db.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE repos SET reconciled_at = ?, reconciled_by = ?
			WHERE tenant = ? AND repo = ? AND reconciled_at <= ?`,
			now.UnixMilli(), by, k.Tenant, k.Repo, claimDue(now, max(every, 0)))
		if err != nil {
			return fmt.Errorf("%s: claim the reconcile pass: %w", k, err)
		}
		n, err := res.RowsAffected()
		won = n == 1
		return err
	})
	return won, err
}

// JobRun is what the jobs table says of a job's last run.
type JobRun struct {
	RanAt time.Time
	RanBy string
	// State is what the run left for the other replicas (discovery's
	// findings), "" when none.
	State string
}

// RunJob runs fn as the singleton job name, for by, when no replica holds
// the job's lease and none ran it in the last period (4/5 of every, as
// ClaimReconcile). fn runs under the lease, which is renewed every third
// of the TTL while fn runs; if it is lost (taken over after a stall),
// fn's context ends with ErrLeaseLost as its cause. ran is false when the
// job was another replica's (or this one's, earlier) this period; err is
// fn's error, or the store's.
func (s *Store) RunJob(ctx context.Context, name, by string, every time.Duration, fn func(ctx context.Context, l *Lease) error) (ran bool, err error) {
	l, err := s.Acquire(ctx, JobKey(name), by)
	if IsLocked(err) || errors.Is(err, errContended) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("job %s: %w", name, err)
	}
	defer func() {
		if _, rerr := s.Release(context.WithoutCancel(ctx), l); rerr != nil && err == nil {
			err = fmt.Errorf("job %s: %w", name, rerr)
		}
	}()
	now := s.now()
	err = s.db.write(ctx, func(tx *wtx) error {
		if err := s.fence(ctx, tx, l); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO jobs (name, ran_at, ran_by) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET ran_at = excluded.ran_at, ran_by = excluded.ran_by WHERE jobs.ran_at <= ?`,
			name, now.UnixMilli(), by, claimDue(now, max(every, 0)))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ran = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("job %s: claim: %w", name, err)
	}
	if !ran {
		return false, nil
	}
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		for {
			t := s.renewTimer(s.ttl / 3)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C():
			}
			if err := s.Renew(jctx, l); err != nil {
				if errors.Is(err, ErrLeaseLost) {
					cancel(fmt.Errorf("job %s: %w", name, ErrLeaseLost))
					return
				}
				// A failed write: the next renewal tries again, within the TTL.
			}
		}
	}()
	err = fn(jctx, l)
	close(stop)
	<-renewed
	return true, err
}

// renewTimer times RunJob's renewals: on the wall clock, like the
// engine's housekeeping (a timer always due within seconds would keep a
// test's clock that moves to the next timer moving); the lease's age is
// judged on the Store's clock. Tests of the renewal set renewClock.
func (s *Store) renewTimer(d time.Duration) Timer {
	if s.renewClock != nil {
		return s.renewClock.NewTimer(d)
	}
	return SystemClock{}.NewTimer(d)
}

// SetJobState records state as what job name's run (under l, its lease)
// leaves for the other replicas.
func (s *Store) SetJobState(ctx context.Context, l *Lease, name, state string) error {
	return s.db.write(ctx, func(tx *wtx) error {
		if err := s.fence(ctx, tx, l); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET state = ? WHERE name = ?`, state, name); err != nil {
			return fmt.Errorf("job %s: record its state: %w", name, err)
		}
		return nil
	})
}

// LastJobRun reads job name's last run; false when it never ran.
func (s *Store) LastJobRun(ctx context.Context, name string) (JobRun, bool, error) {
	var r JobRun
	var at int64
	err := s.db.r.QueryRowContext(ctx, `SELECT ran_at, ran_by, state FROM jobs WHERE name = ?`, name).Scan(&at, &r.RanBy, &r.State)
	if errors.Is(err, sql.ErrNoRows) {
		return JobRun{}, false, nil
	}
	if err != nil {
		return JobRun{}, false, fmt.Errorf("job %s: read its last run: %w", name, err)
	}
	r.RanAt = time.UnixMilli(at)
	return r, true, nil
}

// The replica registry's timing: each replica heartbeats every
// ReplicaBeat; one seen within ReplicaLive is alive; one not seen for
// ReplicaForget is deleted (a replica that stopped without saying so).
const (
	ReplicaBeat   = 10 * time.Second
	ReplicaLive   = 30 * time.Second
	ReplicaForget = 10 * time.Minute
)

// Heartbeat records that replica name is alive now, deletes the replicas
// not seen for ReplicaForget, and counts the live ones (seen within
// ReplicaLive, name included: at least 1).
func (s *Store) Heartbeat(ctx context.Context, name string) (live int, err error) {
	now := s.now().UnixMilli()
	err = s.db.write(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO replicas (name, seen_at, started_at) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET seen_at = excluded.seen_at`, name, now, now); err != nil {
			return fmt.Errorf("replica %s: heartbeat: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE seen_at < ?`, now-ReplicaForget.Milliseconds()); err != nil {
			return fmt.Errorf("replica %s: forget dead replicas: %w", name, err)
		}
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM replicas WHERE seen_at >= ?`, now-ReplicaLive.Milliseconds()).Scan(&live); err != nil {
			return fmt.Errorf("replica %s: count live replicas: %w", name, err)
		}
		return nil
	})
	return max(live, 1), err
}

// LeaveCluster deletes replica name's row (a clean stop), so that the
// others' next heartbeat counts one fewer at once.
func (s *Store) LeaveCluster(ctx context.Context, name string) error {
	return s.db.write(ctx, func(tx *wtx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM replicas WHERE name = ?`, name); err != nil {
			return fmt.Errorf("replica %s: leave: %w", name, err)
		}
		return nil
	})
}

// NewerSchema lists the schema versions a newer mergegate applied to the
// database, beyond what this binary knows (all marked compatible, or Open
// would have refused it; a newer binary may have applied more since):
// empty when there is none.
func (db *DB) NewerSchema(ctx context.Context) ([]migrations.Applied, error) {
	d := migrations.SQLite
	if db.pg {
		d = migrations.Postgres
	}
	return migrations.Newer(ctx, d, db.r.DB, migrations.LatestOf(d))
}

// LiveReplicas counts the replicas seen within ReplicaLive (0 when no
// replica heartbeats: a process without the registry).
func (s *Store) LiveReplicas(ctx context.Context) (int, error) {
	var n int
	err := s.db.r.QueryRowContext(ctx, `SELECT count(*) FROM replicas WHERE seen_at >= ?`, s.now().UnixMilli()-ReplicaLive.Milliseconds()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count live replicas: %w", err)
	}
	return n, nil
}
