package leasedo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Prepare turns one pending delivery into what applies it. It runs before
// the write transaction begins, so it may take its time (decoding JSON) but
// must not call GitHub. An error means the delivery itself is at fault
// (malformed): retrying cannot help, so it is marked failed at once and
// kept for the operator. d.Body is only valid during the call (its buffer
// may be reused): what it returns must not alias it.
type Prepare func(Delivery) (Batch, error)

// Drained is what became of one delivery in a Drain.
type Drained struct {
	Delivery Delivery // without its body
	Results  []Result // its queue actions, when applied
	// Err is why it was not applied. Failed: it was marked failed (kept,
	// with Err, for the operator); otherwise it stays pending and is tried
	// again after a backoff.
	Err    error
	Failed bool
}

// Drain is the outcome of one Drain call.
type Drain struct {
	Done    []Drained // in arrival order
	More    bool      // limit reached: more may be pending
	RetryAt time.Time // non-zero: the next pending delivery waits until then
}

// DrainPolicy is how failed attempts are retried.
type DrainPolicy struct {
	MaxAttempts int                              // failed at this many attempts (default 5)
	Backoff     func(attempts int) time.Duration // wait after the n-th failed attempt (default 2^(n-1) s)
}

// Drain applies up to limit of k's pending deliveries, in arrival order.
// They are read and prepared first, outside any write, since translating
// a payload costs more than applying it and the writer is shared with the
// webhooks' commits. Then ONE write transaction takes and gives back k's
// lease and applies them: the protocol's applying of an event (acquire,
// apply, release) for a batch of deliveries. Nobody can see the lease in
// between, so it is not written; a stale lease left by a dead holder is
// removed, as acquiring and releasing it would. A lease held by someone
// else answers *LockedError and nothing is applied (the deliveries wait
// for it).
//
// The transaction reads k's pending deliveries again and applies those
// prepared, in that order: one pending but not prepared as it is now (put
// back to pending, an attempt recorded meanwhile) ends the call with More,
// so nothing is applied ahead of an earlier delivery. Each is applied
// under a savepoint in the transaction that marks it done, so it is
// applied exactly once: one whose apply fails is rolled back alone, its
// attempt recorded (failed at MaxAttempts), and nothing after it is
// applied in this call. A database error (disk full, I/O, interruption)
// is not the delivery's fault: the whole call fails, nothing is recorded,
// and every delivery stays pending as it was.
func (s *Store) Drain(ctx context.Context, k Key, by string, limit int, prepare Prepare, policy DrainPolicy) (Drain, error) {
	if policy.MaxAttempts <= 0 {
		policy.MaxAttempts = 5
	}
	if policy.Backoff == nil {
		policy.Backoff = func(n int) time.Duration { return time.Duration(1<<min(n-1, 8)) * time.Second }
	}
	if limit <= 0 {
		limit = 16
	}
	prepared, err := s.preparePending(ctx, k, limit, prepare)
	if err != nil {
		return Drain{}, err
	}
	var out Drain
	var locked *LockedError
	// A held lease commits too: finding one stamped in the future (the
	// clock jumped back) restamps it (lease.go).
	err = s.db.write(ctx, func(tx *wtx) error {
		out = Drain{}
		var err error
		locked, err = s.drainKey(ctx, tx, s.now(), k, by, limit, prepared, policy, &out)
		return err
	})
	switch {
	case err != nil:
		return Drain{}, err
	case locked != nil:
		return Drain{}, locked
	}
	return out, nil
}

// preparedDelivery is a pending delivery as it was read and prepared.
type preparedDelivery struct {
	attempts int // as read: an attempt recorded since means it changed
	batch    Batch
	err      error // from Prepare, or an unreadable body: failed at once
}

// preparePending reads k's first pending deliveries and
// prepares them, up to one in backoff (none after it can be applied
// before it).
func (s *Store) preparePending(ctx context.Context, k Key, limit int, prepare Prepare) (map[int64]preparedDelivery, error) {
	var ds []pendingDelivery
	if err := s.db.readOnWriter(ctx, func(q querier) error {
		var err error
		ds, err = pendingIn(ctx, q, k, limit, true)
		return err
	}); err != nil {
		return nil, err
	}
	now := s.now()
	out := make(map[int64]preparedDelivery, len(ds))
	for i := range ds {
		d := ds[i].Delivery
		if d.NextTryAt.After(now) {
			break
		}
		body, err := decodeBody(ds[i].enc, ds[i].stored)
		ds[i].stored = nil // garbage once decoded

		// An unreadable body is as malformed as can be: failed at once.
		p := preparedDelivery{attempts: d.Attempts, err: err}
		if err == nil {
			d.Body = body
			p.batch, p.err = prepare(d)
		}
		out[d.Seq] = p
	}
	return out, nil
}

// drainKey is Drain's write, inside tx: it applies what prepared holds in
// the order k's deliveries are pending now, and fills out.
func (s *Store) drainKey(ctx context.Context, tx *wtx, now time.Time, k Key, by string, limit int, prepared map[int64]preparedDelivery, policy DrainPolicy, out *Drain) (*LockedError, error) {
	locked, err := s.takeAndGiveBack(ctx, tx, k, now)
	if err != nil || locked != nil {
		return locked, err
	}
	ds, err := pendingIn(ctx, tx, k, limit, false)
	if err != nil {
		return nil, err
	}
	out.More = len(ds) == limit
	l := &Lease{Key: k, By: by}
	for _, pd := range ds {
		d := pd.Delivery
		if d.NextTryAt.After(now) {
			out.RetryAt, out.More = d.NextTryAt, false
			break
		}
		p, ok := prepared[d.Seq]
		if !ok || p.attempts != d.Attempts {
			out.More = true // prepared on the next call
			break
		}
		r, retryAt, err := s.drainOne(ctx, tx, l, now, d, p, policy)
		if err != nil {
			return nil, err
		}
		out.Done = append(out.Done, r)
		if !retryAt.IsZero() {
			out.RetryAt, out.More = retryAt, false
			break
		}
	}
	return nil, nil
}

// takeAndGiveBack is Acquire followed by Release inside tx: a held lease
// answers LockedError (leaseHeld); a stale one is deleted. On PostgreSQL
// it claims the repository first (claimKey): another replica draining it
// or taking its lease right now answers locked, and the deliveries wait
// for that replica's transaction (drains claim repositories, never single
// deliveries, so one repository's are applied in order by one replica at
// a time).
func (s *Store) takeAndGiveBack(ctx context.Context, tx *wtx, k Key, now time.Time) (*LockedError, error) {
	if tx.pg {
		if ok, err := claimKey(ctx, tx, k); err != nil || !ok {
			return busy(k), err
		}
	}
	cur, locked, err := s.leaseHeld(ctx, tx, k, now)
	if err != nil || locked != nil || cur == nil {
		return locked, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE tenant = ? AND repo = ? AND token = ?`, k.Tenant, k.Repo, cur.token); err != nil {
		return nil, fmt.Errorf("%s: remove stale lease: %w", k, err)
	}
	return nil, nil
}

// pendingDelivery is a pending delivery as read, its body as stored.
type pendingDelivery struct {
	Delivery
	enc    string
	stored []byte
}

// pendingIn reads k's first pending deliveries, with their bodies (as
// stored) when withBody.
func pendingIn(ctx context.Context, tx querier, k Key, limit int, withBody bool) ([]pendingDelivery, error) {
	query := `SELECT d.seq, d.delivery_id, d.event, d.action, x'', '', d.received_at, d.attempts, d.next_try_at
		FROM deliveries d WHERE d.state = 'pending' AND d.tenant = ? AND d.repo = ? ORDER BY d.seq LIMIT ?`
	if withBody {
		query = `SELECT d.seq, d.delivery_id, d.event, d.action, coalesce(b.body, x''),
			coalesce(b.encoding, ''), d.received_at, d.attempts, d.next_try_at
		FROM deliveries d LEFT JOIN delivery_bodies b ON b.seq = d.seq
		WHERE d.state = 'pending' AND d.tenant = ? AND d.repo = ? ORDER BY d.seq LIMIT ?`
	}
	rows, err := tx.QueryContext(ctx, query, k.Tenant, k.Repo, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: read pending deliveries: %w", k, err)
	}
	defer rows.Close()
	var out []pendingDelivery
	for rows.Next() {
		p := pendingDelivery{Delivery: Delivery{Tenant: k.Tenant, Repo: k.Repo, State: DeliveryPending}}
		d := &p.Delivery
		var recv, next int64
		if err := rows.Scan(&d.Seq, &d.ID, &d.Event, &d.Action, &p.stored, &p.enc, &recv, &d.Attempts, &next); err != nil {
			return nil, fmt.Errorf("%s: read pending deliveries: %w", k, err)
		}
		d.ReceivedAt, d.NextTryAt = time.UnixMilli(recv), time.UnixMilli(next)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: read pending deliveries: %w", k, err)
	}
	return out, nil
}

// drainOne applies d, as p prepared it, under a savepoint. A non-zero
// retryAt: d stays pending in backoff until then, so nothing after it may
// be applied now.
func (s *Store) drainOne(ctx context.Context, tx *wtx, l *Lease, now time.Time, d Delivery, p preparedDelivery, policy DrainPolicy) (r Drained, retryAt time.Time, err error) {
	var none time.Time
	r.Delivery = d
	b, perr := p.batch, p.err
	if perr != nil {
		r.Err, r.Failed = perr, true
		return r, none, s.recordAttempt(ctx, tx, d, perr, DeliveryFailed, now)
	}
	var results []Result
	var applied bool
	aerr, err := savepoint(ctx, tx, func() (err error) {
		results, applied, err = s.applyDelivery(ctx, tx, l, now.UnixMilli(), d.Seq, b)
		return err
	})
	if err != nil {
		return r, none, fmt.Errorf("delivery %s: %w", d.ID, err)
	}
	if aerr == nil {
		if !applied { // cannot happen under the writer lock; kept honest
			r.Err = errors.New("no longer pending")
		}
		r.Results = results
		return r, none, nil
	}
	if databaseFault(ctx, aerr) {
		return r, none, aerr
	}
	state := DeliveryPending
	if d.Attempts+1 >= policy.MaxAttempts {
		state = DeliveryFailed
	}
	r.Err, r.Failed = aerr, state == DeliveryFailed
	next := now.Add(policy.Backoff(d.Attempts + 1))
	if err := s.recordAttempt(ctx, tx, d, aerr, state, next); err != nil {
		return r, none, err
	}
	if r.Failed {
		return r, none, nil
	}
	return r, next, nil
}

// recordAttempt counts a failed attempt of d and sets its state and when
// it may be tried next.
func (s *Store) recordAttempt(ctx context.Context, tx *wtx, d Delivery, cause error, state string, next time.Time) error {
	msg := cause.Error()
	if len(msg) > 2000 {
		msg = strings.ToValidUTF8(msg[:2000], "")
	}
	if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET attempts = attempts + 1, last_error = ?, state = ?, next_try_at = ? WHERE seq = ?`,
		msg, state, next.UnixMilli(), d.Seq); err != nil {
		return fmt.Errorf("delivery %s: record failure: %w", d.ID, err)
	}
	return nil
}

// databaseFault tells the database's own failures (full, I/O, busy,
// interrupted: not the delivery's fault, and retried without counting an
// attempt) from the delivery's (bad data: counted, then failed).
func databaseFault(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if isPostgresFault(err) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
		sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM, sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}
