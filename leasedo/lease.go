package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// Lease is a held (tenant, repo) lease. Token fences it: only the holder of
// the token can release it or write under it, so a holder whose lease went
// stale and was taken over cannot undo the new holder's work.
type Lease struct {
	Key      Key
	By       string
	Token    string // Fence in decimal, as the leases table keeps it
	Fence    int64  // from a counter that never gives a number twice (nextFence)
	Acquired time.Time

	// confirmed is when the lease's row was last written by its holder
	// (acquired or renewed, committed): the row's timestamp, which its
	// age, and so a takeover, count from. Hold reads it.
	confirmed atomic.Pointer[time.Time]
}

func (l *Lease) confirm(at time.Time) { l.confirmed.Store(&at) }

// LockedError is the admin API's 409 "locked": someone holds the lease.
type LockedError struct {
	Key       Key
	HeldBy    string
	ExpiresIn time.Duration
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("%s: locked (held by %s, expires in %s)", e.Key, e.HeldBy, e.ExpiresIn)
}

// IsLocked reports whether err is a LockedError.
func IsLocked(err error) bool {
	var le *LockedError
	return errors.As(err, &le)
}

// ErrLeaseLost means the lease went stale and another holder took it over;
// nothing was written.
var ErrLeaseLost = errors.New("lease lost: it went stale and was taken over")

// LeaseState is check's answer (GET /lease). Stale and HeldBy are also set for
// a lease past its TTL, which no longer locks (the next acquire overwrites it).
type LeaseState struct {
	Locked    bool   `json:"locked"`
	HeldBy    string `json:"held_by,omitempty"`
	ExpiresIn *int64 `json:"expires_in,omitempty"` // ms, when locked
	Stale     bool   `json:"stale,omitempty"`
	AgeMS     *int64 `json:"age_ms,omitempty"`
}

// StaleLease is one lease force-released by reconcile.
type StaleLease struct {
	HeldBy string `json:"held_by"`
	AgeMS  int64  `json:"age_ms"`
}

type leaseRow struct {
	ts     int64
	heldBy string
	token  string
}

func getLease(ctx context.Context, q querier, k Key) (*leaseRow, error) {
	var r leaseRow
	err := q.QueryRowContext(ctx, `SELECT ts, held_by, token FROM leases WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo).
		Scan(&r.ts, &r.heldBy, &r.token)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: read lease: %w", k, err)
	}
	return &r, nil
}

// Acquire takes k's lease (docs/lease-protocol.md): a lease younger than the TTL answers
// LockedError; a missing or stale one is (over)written with now, by and a
// new fencing token.
//
// The write is conditional: a missing lease is inserted only if still
// missing, a stale one replaced only if it still carries the token read.
// On SQLite nobody can come between the read and the write (one writer);
// on PostgreSQL another replica may, and its write makes this one match
// no row (the second waits for the first's commit, then finds the row
// changed), so this one reads the lease again and answers locked:
// exactly one of racing acquirers wins. On PostgreSQL it first claims the
// repository (waitClaim), so that no replica applies k's deliveries while
// it takes the lease; a claim held elsewhere is waited for (one short
// transaction), and then the lease is read as that transaction left it.
func (s *Store) Acquire(ctx context.Context, k Key, by string) (*Lease, error) {
	now := s.now()
	l := &Lease{Key: k, By: by, Acquired: now}
	var locked *LockedError // answered after the commit (of a clamped ts)
	err := s.db.write(ctx, func(tx *wtx) error {
		if tx.pg {
			if err := waitClaim(ctx, tx, k); err != nil {
				return err
			}
		}
		for attempt := 0; ; attempt++ {
			cur, held, err := s.leaseHeld(ctx, tx, k, now)
			if err != nil || held != nil {
				locked = held
				return err
			}
			if attempt > 0 {
				// Taken and given back meanwhile: another replica is
				// busy with this repository.
				return fmt.Errorf("%s: acquire lease: %w", k, errContended)
			}
			if l.Fence, err = nextFence(ctx, tx); err != nil {
				return fmt.Errorf("%s: fencing token: %w", k, err)
			}
			l.Token = strconv.FormatInt(l.Fence, 10)
			var res sql.Result
			if cur == nil {
				res, err = tx.ExecContext(ctx, `INSERT INTO leases (tenant, repo, ts, held_by, token) VALUES (?, ?, ?, ?, ?)
					ON CONFLICT (tenant, repo) DO NOTHING`, k.Tenant, k.Repo, now.UnixMilli(), by, l.Token)
			} else {
				res, err = tx.ExecContext(ctx, `UPDATE leases SET ts = ?, held_by = ?, token = ? WHERE tenant = ? AND repo = ? AND token = ?`,
					now.UnixMilli(), by, l.Token, k.Tenant, k.Repo, cur.token)
			}
			if err != nil {
				return fmt.Errorf("%s: write lease: %w", k, err)
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				return err
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if locked != nil {
		return nil, locked
	}
	l.confirm(now)
	return l, nil
}

// errContended: a lease was taken and given back by someone else while an
// acquire was between its read and its write.
var errContended = errors.New("contended: taken and given back meanwhile")

// nextFence is the next fencing token: a number from one counter that only
// grows (PostgreSQL: the sequence lease_fence; SQLite: the row of
// lease_fence, under the one writer), so it is never given twice, even
// after a lease row is deleted, and a successor's token is larger than
// its predecessor's.
func nextFence(ctx context.Context, tx *wtx) (int64, error) {
	q := `UPDATE lease_fence SET n = n + 1 WHERE id = 1 RETURNING n`
	if tx.pg {
		q = `SELECT nextval('lease_fence')`
	}
	var n int64
	err := tx.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

// leaseHeld reads k's lease inside tx and says whether someone holds it:
// a lease younger than the TTL answers LockedError. One written in the
// future (the clock went back since) has its age count from now, so that
// it expires one TTL after the jump instead of staying locked for the
// jump's length; its timestamp is rewritten to now (its holder's next
// write renews it anyway). cur is the stale lease, if any, when it is not
// held.
func (s *Store) leaseHeld(ctx context.Context, tx *wtx, k Key, now time.Time) (cur *leaseRow, locked *LockedError, err error) {
	cur, err = getLease(ctx, tx, k)
	if err != nil || cur == nil {
		return nil, nil, err
	}
	age := time.Duration(now.UnixMilli()-cur.ts) * time.Millisecond
	if age < 0 {
		if _, err := tx.ExecContext(ctx, `UPDATE leases SET ts = ? WHERE tenant = ? AND repo = ? AND token = ?`,
			now.UnixMilli(), k.Tenant, k.Repo, cur.token); err != nil {
			return nil, nil, fmt.Errorf("%s: lease from the future: %w", k, err)
		}
		age = 0
	}
	if age < s.ttl {
		return cur, &LockedError{Key: k, HeldBy: cur.heldBy, ExpiresIn: s.ttl - age}, nil
	}
	return cur, nil, nil
}

// Release releases l if it is still held under l's token; it never deletes a
// lease that another holder took over. It reports whether it released.
func (s *Store) Release(ctx context.Context, l *Lease) (bool, error) {
	if l == nil {
		return false, nil
	}
	var released bool
	err := s.db.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE tenant = ? AND repo = ? AND token = ?`, l.Key.Tenant, l.Key.Repo, l.Token)
		if err != nil {
			return fmt.Errorf("%s: release lease: %w", l.Key, err)
		}
		n, _ := res.RowsAffected()
		released = n > 0
		if released {
			return s.db.released(ctx, tx, l.Key)
		}
		return nil
	})
	return released, err
}

// ReleaseAny is the admin API's POST /lease/release, the operator's override: the lease
// is deleted whoever holds it.
func (s *Store) ReleaseAny(ctx context.Context, k Key) error {
	return s.db.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE tenant = ? AND repo = ?`, k.Tenant, k.Repo)
		if err != nil {
			return fmt.Errorf("%s: release lease: %w", k, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return s.db.released(ctx, tx, k)
		}
		return nil
	})
}

// Renew moves l's timestamp to now, so that a holder doing long work (GitHub
// calls) keeps its lease. ErrLeaseLost if it was taken over.
func (s *Store) Renew(ctx context.Context, l *Lease) error {
	return s.db.write(ctx, func(tx *wtx) error { return s.fence(ctx, tx, l) })
}

// fence checks inside a write transaction that l is still held, and renews it.
func (s *Store) fence(ctx context.Context, tx *wtx, l *Lease) error {
	if l == nil {
		return errors.New("write without a lease")
	}
	now := s.now()
	res, err := tx.ExecContext(ctx, `UPDATE leases SET ts = ? WHERE tenant = ? AND repo = ? AND token = ?`,
		now.UnixMilli(), l.Key.Tenant, l.Key.Repo, l.Token)
	if err != nil {
		return fmt.Errorf("%s: renew lease: %w", l.Key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("%s: %w", l.Key, ErrLeaseLost)
	}
	tx.afterCommit(func() { l.confirm(now) })
	return nil
}

// Hold confirms that l is still held, before work that no transaction can
// fence: a call to GitHub. A lease whose row its holder wrote less than a
// third of the TTL ago is held (nobody may take it over before the TTL);
// an older one is renewed first, ErrLeaseLost when it was taken over. So
// a holder that was paused past the TTL (SIGSTOP, a VM frozen for a
// migration, a long stall) and resumes mid-pass asks the database before
// its next request, and learns that it lost the lease instead of sending
// it: the new holder's requests and its own never overlap, up to the
// pause falling between this check and the request going out.
func (s *Store) Hold(ctx context.Context, l *Lease) error {
	if c := l.confirmed.Load(); c != nil {
		if age := s.now().Sub(*c); age >= 0 && age < s.ttl/3 {
			return nil
		}
	}
	return s.Renew(ctx, l)
}

// Check reads k's lease without taking it (GET /lease).
func (s *Store) Check(ctx context.Context, k Key) (LeaseState, error) {
	cur, err := getLease(ctx, s.db.r, k)
	if err != nil || cur == nil {
		return LeaseState{}, err
	}
	return s.leaseState(cur), nil
}

func (s *Store) leaseState(cur *leaseRow) LeaseState {
	// A lease written in the future (the clock went back) is as young as
	// can be; the next Acquire restarts its TTL from now (see Acquire).
	age := max(s.now().UnixMilli()-cur.ts, 0)
	if age < s.ttl.Milliseconds() {
		exp := s.ttl.Milliseconds() - age
		return LeaseState{Locked: true, HeldBy: cur.heldBy, ExpiresIn: &exp}
	}
	return LeaseState{Locked: false, HeldBy: cur.heldBy, Stale: true, AgeMS: &age}
}

// querier is what both *sql.DB and *sql.Tx offer for reads.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
