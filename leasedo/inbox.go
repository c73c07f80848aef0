package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrInboxClosed is returned by Enqueue after Close.
var ErrInboxClosed = errors.New("inbox closed")

// Inbox commits webhook deliveries durably. Concurrent Enqueue calls share
// one transaction (group commit): under load many deliveries cost one commit.
type Inbox struct {
	s        *Store
	maxBatch int
	reqs     chan *enqueueReq
	quit     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

type enqueueReq struct {
	d    Delivery
	enc  string // how body is stored (encodeBody)
	body []byte
	dup  bool
	err  error
	done chan struct{}
	// deadline is when the webhook waiting for it must have its answer
	// (PostgreSQL: inboxCommitTimeout after Enqueue; zero on SQLite).
	deadline time.Time
}

// NewInbox starts the committer. maxBatch bounds one transaction (default 256).
func (s *Store) NewInbox(maxBatch int) *Inbox {
	if maxBatch <= 0 {
		maxBatch = 256
	}
	in := &Inbox{s: s, maxBatch: maxBatch, reqs: make(chan *enqueueReq), quit: make(chan struct{})}
	in.wg.Add(1)
	go in.run()
	return in
}

// Enqueue stores d and returns once it is committed. A delivery id already
// stored answers duplicate=true and stores nothing.
func (in *Inbox) Enqueue(ctx context.Context, d Delivery) (duplicate bool, err error) {
	if d.ID == "" || d.Event == "" {
		return false, errors.New("enqueue: delivery id and event are required")
	}
	r := &enqueueReq{d: d, done: make(chan struct{})}
	// Compressed here, on the caller's goroutine: callers run in
	// parallel, the committer is one.
	r.enc, r.body = encodeBody(d.Body)
	var timeout <-chan time.Time
	if in.s.db.pg {
		// Bounded from here: a commit stuck on an unreachable server
		// must not hold the deliveries queued behind it past GitHub's
		// 10 s either.
		r.deadline = time.Now().Add(inboxCommitTimeout)
		t := time.NewTimer(inboxCommitTimeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case in.reqs <- r:
	case <-in.quit:
		return false, ErrInboxClosed
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timeout:
		return false, fmt.Errorf("enqueue: not taken within %s: the commits before it wait on the database", inboxCommitTimeout)
	}
	// Wait for the commit even if ctx ends: the answer must say what happened.
	<-r.done
	return r.dup, r.err
}

// Close stops the committer after the requests already handed over are done.
func (in *Inbox) Close() {
	in.once.Do(func() { close(in.quit) })
	in.wg.Wait()
}

func (in *Inbox) run() {
	defer in.wg.Done()
	for {
		var first *enqueueReq
		select {
		case first = <-in.reqs:
		case <-in.quit:
			// Drain what was handed over before the quit.
			for {
				select {
				case r := <-in.reqs:
					in.commit([]*enqueueReq{r})
				default:
					return
				}
			}
		}
		batch := []*enqueueReq{first}
	fill:
		for len(batch) < in.maxBatch {
			select {
			case r := <-in.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		in.commit(batch)
	}
}

func (in *Inbox) commit(batch []*enqueueReq) {
	ctx := context.Background()
	if in.s.db.pg {
		// Webhooks wait for this, and GitHub gives up after 10 s: a
		// server that does not answer is a 503 before then, by the
		// earliest deadline of the batch (pgfaults.go).
		deadline := batch[0].deadline
		for _, r := range batch[1:] {
			if r.deadline.Before(deadline) {
				deadline = r.deadline
			}
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	err := in.store(ctx, batch)
	if err != nil && in.s.db.pg && retryableLost(err) {
		// The connection was lost before the COMMIT was sent: nothing
		// was committed, and the pool was emptied. Once more, on a new
		// connection (after a restart of the server, or its backends
		// terminated, the first write finds the old one dead).
		err = in.store(ctx, batch)
	}
	for _, r := range batch {
		if err != nil {
			r.err, r.dup = err, false
		}
		close(r.done)
	}
}

// store writes batch in one transaction.
func (in *Inbox) store(ctx context.Context, batch []*enqueueReq) error {
	return in.s.db.writeFirst(ctx, func(tx *wtx) error {
		for _, r := range batch {
			d := r.d
			r.dup = false // this may be a second run (DB.writeInTurn)
			seq, dup, err := insertDelivery(ctx, tx, d)
			if err != nil {
				return fmt.Errorf("store delivery %s: %w", d.ID, err)
			}
			if dup {
				r.dup = true
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO delivery_bodies (seq, body, encoding) VALUES (?, coalesce(?, x''), ?)`,
				seq, r.body, r.enc); err != nil {
				return fmt.Errorf("store delivery %s: %w", d.ID, err)
			}
		}
		return nil
	})
}

const insertDeliverySQL = `INSERT INTO deliveries (delivery_id, event, action, tenant, repo, received_at, state)
	VALUES (?, ?, ?, ?, ?, ?, 'pending') ON CONFLICT (delivery_id) DO NOTHING`

// insertDelivery stores d's row and returns its seq, or dup when its id is
// stored already. SQLite reads the seq back as the last rowid;
// PostgreSQL has no such thing and returns it (RETURNING, no row for a
// duplicate).
func insertDelivery(ctx context.Context, tx *wtx, d Delivery) (seq int64, dup bool, err error) {
	if tx.pg {
		err := tx.QueryRowContext(ctx, insertDeliverySQL+` RETURNING seq`,
			d.ID, d.Event, d.Action, d.Tenant, d.Repo, d.ReceivedAt.UnixMilli()).Scan(&seq)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, true, nil
		}
		return seq, false, err
	}
	res, err := tx.ExecContext(ctx, insertDeliverySQL, d.ID, d.Event, d.Action, d.Tenant, d.Repo, d.ReceivedAt.UnixMilli())
	if err != nil {
		return 0, false, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, true, nil
	}
	seq, err = res.LastInsertId()
	return seq, false, err
}

// Pending returns up to limit pending deliveries of k, with their bodies,
// in arrival order.
func (s *Store) Pending(ctx context.Context, k Key, limit int) ([]Delivery, error) {
	return s.deliveries(ctx, true, `WHERE d.state = 'pending' AND d.tenant = ? AND d.repo = ? ORDER BY d.seq LIMIT ?`, k.Tenant, k.Repo, limit)
}

// Deliveries lists k's deliveries in the given state, newest first, without
// their bodies.
func (s *Store) Deliveries(ctx context.Context, k Key, state string, limit int) ([]Delivery, error) {
	where, args := deliveriesWhere(k, state, limit)
	return s.deliveries(ctx, false, where, args...)
}

// deliveriesWhere selects Deliveries' rows. Pending and failed ones are
// read from their own indexes, which serve their literal state alone;
// done ones (kept until pruned, possibly millions) have none.
func deliveriesWhere(k Key, state string, limit int) (string, []any) {
	const rest = ` AND d.tenant = ? AND d.repo = ? ORDER BY d.seq DESC LIMIT ?`
	switch state {
	case DeliveryPending:
		return `WHERE d.state = 'pending'` + rest, []any{k.Tenant, k.Repo, limit}
	case DeliveryFailed:
		return `WHERE d.state = 'failed'` + rest, []any{k.Tenant, k.Repo, limit}
	}
	return `WHERE d.state = ?` + rest, []any{state, k.Tenant, k.Repo, limit}
}

// NextTry reports when a pending delivery in backoff may be tried again.
func (s *Store) NextTry(ctx context.Context, seq int64) (time.Time, error) {
	var ms int64
	if err := s.db.r.QueryRowContext(ctx, `SELECT next_try_at FROM deliveries WHERE seq = ?`, seq).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("delivery %d: %w", seq, err)
	}
	return time.UnixMilli(ms), nil
}

func (s *Store) deliveries(ctx context.Context, withBody bool, where string, args ...any) ([]Delivery, error) {
	body, join := `x'', ''`, ``
	if withBody {
		body, join = `coalesce(b.body, x''), coalesce(b.encoding, '')`, `LEFT JOIN delivery_bodies b ON b.seq = d.seq`
	}
	rows, err := s.db.r.QueryContext(ctx, `SELECT d.seq, d.delivery_id, d.event, d.action, d.tenant, d.repo, `+body+`,
			d.received_at, d.state, d.attempts, d.last_error, d.next_try_at
		FROM deliveries d `+join+` `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read deliveries: %w", err)
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		var d Delivery
		var recv, next int64
		var enc string
		if err := rows.Scan(&d.Seq, &d.ID, &d.Event, &d.Action, &d.Tenant, &d.Repo, &d.Body, &enc, &recv, &d.State, &d.Attempts, &d.LastError, &next); err != nil {
			return nil, fmt.Errorf("read deliveries: %w", err)
		}
		var err error
		if d.Body, err = decodeBody(enc, d.Body); err != nil {
			return nil, fmt.Errorf("read delivery %s: %w", d.ID, err)
		}
		d.ReceivedAt = time.UnixMilli(recv)
		d.NextTryAt = time.UnixMilli(next)
		out = append(out, d)
	}
	return out, rows.Err()
}

const pendingKeysSQL = `SELECT DISTINCT tenant, repo FROM deliveries WHERE state = 'pending'`

// dueKeysSQL: pending deliveries, entries to be read (queued) or whose
// checks passed while nobody looked at them as the head (gate_passed, no
// reason yet), and check runs to end. Each part is small: the deliveries'
// part uses its partial index, the queue and the outbox hold few rows.
const dueKeysSQL = pendingKeysSQL + `
	UNION SELECT tenant, repo FROM queue WHERE status = 'queued' OR (status = 'gate_passed' AND gate_reason = '')
	UNION SELECT tenant, repo FROM check_outbox`

// PendingKeys lists every (tenant, repo) with pending deliveries: what a
// restart must resume.
func (s *Store) PendingKeys(ctx context.Context) ([]Key, error) {
	return s.keys(ctx, pendingKeysSQL)
}

// DueKeys lists every (tenant, repo) with work a sync has to do: pending
// deliveries, entries to be read or merged, check runs to end. A repair
// made beside the server (mergegate reconcile on the database) shows up
// here, and the server's sweep picks it up.
func (s *Store) DueKeys(ctx context.Context) ([]Key, error) {
	return s.keys(ctx, dueKeysSQL)
}

func (s *Store) keys(ctx context.Context, query string) ([]Key, error) {
	rows, err := s.db.r.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("list pending deliveries: %w", err)
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.Tenant, &k.Repo); err != nil {
			return nil, fmt.Errorf("list pending deliveries: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// One SELECT per state: each is counted from its own (partial) index.
const deliveryCountsSQL = `SELECT 'pending', count(*) FROM deliveries WHERE state = 'pending'
	UNION ALL SELECT 'failed', count(*) FROM deliveries WHERE state = 'failed'`

// DeliveryCounts counts the unapplied deliveries by state, pending and
// failed (for the dashboard and metrics, on every scrape). Processed ones
// are not counted: that read every row kept (millions, with a busy
// installation and the default retention), where these few are counted
// from the index.
func (s *Store) DeliveryCounts(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.r.QueryContext(ctx, deliveryCountsSQL)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count deliveries: %w", err)
		}
		if n > 0 {
			out[st] = n
		}
	}
	return out, rows.Err()
}

// Batch is everything one delivery does, applied in one transaction together
// with marking the delivery done: a delivery is applied exactly once.
type Batch struct {
	Events       []Event // queue events for the lease's (tenant, repo)
	Log          []Event // written to the event log only, no queue action (ignored deliveries)
	Track        []Key   // repositories to track
	Forget       []Key   // repositories to forget (uninstalled)
	ForgetTenant bool    // forget every repository of the lease's tenant
	Suspend      *bool   // pause (true) or resume (false) the lease's tenant
}

// ApplyDelivery applies b for delivery seq under l and marks it done. A
// delivery no longer pending (already applied) is skipped: applied=false.
func (s *Store) ApplyDelivery(ctx context.Context, l *Lease, seq int64, b Batch) (results []Result, applied bool, err error) {
	err = s.underLease(ctx, l, func(tx *wtx, now int64) error {
		results, applied, err = s.applyDelivery(ctx, tx, l, now, seq, b)
		return err
	})
	return results, applied, err
}

func (s *Store) applyDelivery(ctx context.Context, tx *wtx, l *Lease, now, seq int64, b Batch) (results []Result, applied bool, err error) {
	// Marked done first, only if still pending: that is the check that it
	// was not applied already, in one statement where a read and a write
	// were two. Whatever fails after it rolls the mark back with the rest.
	res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'done', processed_at = ?, attempts = attempts + 1 WHERE seq = ? AND state = 'pending'`, now, seq)
	if err != nil {
		return nil, false, fmt.Errorf("delivery %d: mark done: %w", seq, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err == nil { // applied before, or no such delivery (an error)
			var state string
			if err = tx.QueryRowContext(ctx, `SELECT state FROM deliveries WHERE seq = ?`, seq).Scan(&state); err != nil {
				err = fmt.Errorf("delivery %d: %w", seq, err)
			}
		}
		return nil, false, err
	}
	for _, ev := range b.Events {
		if ev.Key() != l.Key {
			return nil, false, fmt.Errorf("delivery %d: event for %s under the lease of %s", seq, ev.Key(), l.Key)
		}
		if err := ev.Validate(); err != nil {
			return nil, false, fmt.Errorf("delivery %d: %w", seq, err)
		}
		r, err := s.apply(ctx, tx, ev)
		if err != nil {
			return nil, false, err
		}
		results = append(results, r)
	}
	for _, ev := range b.Log {
		if ev.Key() != l.Key {
			return nil, false, fmt.Errorf("delivery %d: event for %s under the lease of %s", seq, ev.Key(), l.Key)
		}
		if err := insertEvent(ctx, tx, ev.Key(), now, ev); err != nil {
			return nil, false, err
		}
	}
	if err := track(ctx, tx, now, b.Track); err != nil {
		return nil, false, err
	}
	forgetKeys := b.Forget
	if b.ForgetTenant {
		keys, err := tenantRepos(ctx, tx, l.Key.Tenant)
		if err != nil {
			return nil, false, err
		}
		forgetKeys = append(forgetKeys, keys...)
		if _, err := tx.ExecContext(ctx, `DELETE FROM installations WHERE tenant = ?`, l.Key.Tenant); err != nil {
			return nil, false, fmt.Errorf("tenant %s: forget: %w", l.Key.Tenant, err)
		}
	}
	if err := forget(ctx, tx, now, forgetKeys); err != nil {
		return nil, false, err
	}
	if b.Suspend != nil {
		if err := setSuspended(ctx, tx, now, l.Key.Tenant, *b.Suspend); err != nil {
			return nil, false, err
		}
	}
	return results, true, nil
}

// RetryFailed puts k's failed deliveries back to pending (an operator's
// decision after fixing the cause) and returns how many.
func (s *Store) RetryFailed(ctx context.Context, k Key) (int64, error) {
	var n int64
	err := s.db.write(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE deliveries SET state = 'pending', attempts = 0, next_try_at = 0 WHERE state = 'failed' AND tenant = ? AND repo = ?`, k.Tenant, k.Repo)
		if err != nil {
			return fmt.Errorf("%s: retry failed deliveries: %w", k, err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

// pruneBatchSQL picks the next processed deliveries to prune.
const pruneBatchSQL = `SELECT seq FROM deliveries WHERE state = 'done' AND processed_at < ? ORDER BY seq LIMIT 1000`

// Prune deletes processed deliveries older than before, in short batches,
// and the heads seen more than HeadSeenKept ago (SeeHead deletes a
// repository's as new ones come; these are of repositories with no push
// since).
func (s *Store) Prune(ctx context.Context, before time.Time) (int64, error) {
	if err := s.db.write(ctx, func(tx *wtx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM head_seen WHERE seen_at < ?`, s.clock.Now().Add(-HeadSeenKept).UnixMilli())
		return err
	}); err != nil {
		return 0, fmt.Errorf("prune heads seen: %w", err)
	}
	var total int64
	for {
		var n int64
		err := s.db.write(ctx, func(tx *wtx) error {
			// The same thousand rows, twice: bodies first, then the rows.
			const batch = pruneBatchSQL
			if _, err := tx.ExecContext(ctx, `DELETE FROM delivery_bodies WHERE seq IN (`+batch+`)`, before.UnixMilli()); err != nil {
				return fmt.Errorf("prune delivery bodies: %w", err)
			}
			res, err := tx.ExecContext(ctx, `DELETE FROM deliveries WHERE seq IN (`+batch+`)`, before.UnixMilli())
			if err != nil {
				return fmt.Errorf("prune deliveries: %w", err)
			}
			n, _ = res.RowsAffected()
			return nil
		})
		total += n
		if err != nil || n < 1000 {
			return total, err
		}
	}
}

// dropBodiesBatchSQL picks the next applied deliveries whose bodies may go,
// in the order they were applied, after the cursor (processed_at, seq):
// a range of the deliveries_processed index, read in its own order.
const dropBodiesBatchSQL = `SELECT seq, processed_at FROM deliveries
	WHERE state = 'done' AND processed_at < ? AND processed_at >= ? AND NOT (processed_at = ? AND seq <= ?)
	ORDER BY processed_at, seq LIMIT 1000`

// firstBodySQL: where DropBodies starts after a start of the process, the
// oldest applied delivery whose body is still kept (by arrival; bodies go
// in about that order).
const firstBodySQL = `SELECT d.processed_at, d.seq FROM delivery_bodies b CROSS JOIN deliveries d ON d.seq = b.seq
	WHERE d.state = 'done' ORDER BY b.seq LIMIT 1`

// firstBodyPostgresSQL is firstBodySQL for PostgreSQL, where a CROSS JOIN
// takes no ON (and the planner picks the order itself).
const firstBodyPostgresSQL = `SELECT d.processed_at, d.seq FROM delivery_bodies b JOIN deliveries d ON d.seq = b.seq
	WHERE d.state = 'done' ORDER BY b.seq LIMIT 1`

// DropBodies deletes the bodies of deliveries applied before before, in
// short batches; their rows stay (until Prune), and so do their queue
// events and audit. Pending and failed deliveries keep their bodies: they
// are still to be applied. It goes through the applied deliveries in the
// order they were applied, each one once while the process runs; after a
// start it begins at the oldest applied delivery that still has a body.
func (s *Store) DropBodies(ctx context.Context, before time.Time) (int64, error) {
	s.bodies.Lock()
	defer s.bodies.Unlock()
	if !s.bodies.set {
		var at, seq sql.NullInt64
		q := firstBodySQL
		if s.db.pg {
			q = firstBodyPostgresSQL
		}
		err := s.db.r.QueryRowContext(ctx, q).Scan(&at, &seq)
		switch {
		case errors.Is(err, sql.ErrNoRows): // no body is kept before the cutoff
			s.bodies.at, s.bodies.seq = before.UnixMilli()-1, 0
		case err != nil:
			return 0, fmt.Errorf("drop delivery bodies: %w", err)
		default:
			// A delivery applied late (after retries) may have gone
			// before one that arrived earlier: start an hour before.
			s.bodies.at, s.bodies.seq = at.Int64-time.Hour.Milliseconds(), 0
		}
		s.bodies.set = true
	}
	cutoff := before.UnixMilli()
	var total int64
	for {
		var n, rows, at, seq int64
		err := s.db.write(ctx, func(tx *wtx) error {
			n, rows, at, seq = 0, 0, s.bodies.at, s.bodies.seq
			res, err := tx.QueryContext(ctx, dropBodiesBatchSQL, cutoff, at, at, seq)
			if err != nil {
				return fmt.Errorf("drop delivery bodies: %w", err)
			}
			var seqs []any
			for res.Next() {
				if err := res.Scan(&seq, &at); err != nil {
					res.Close()
					return fmt.Errorf("drop delivery bodies: %w", err)
				}
				seqs = append(seqs, seq)
			}
			res.Close()
			if err := res.Err(); err != nil {
				return fmt.Errorf("drop delivery bodies: %w", err)
			}
			rows = int64(len(seqs))
			if rows == 0 {
				return nil
			}
			del := `DELETE FROM delivery_bodies WHERE seq IN (SELECT value FROM json_each(?))`
			if tx.pg {
				del = `DELETE FROM delivery_bodies WHERE seq IN (SELECT jsonb_array_elements_text(CAST(? AS jsonb))::bigint)`
			}
			r, err := tx.ExecContext(ctx, del, jsonInts(seqs))
			if err != nil {
				return fmt.Errorf("drop delivery bodies: %w", err)
			}
			n, _ = r.RowsAffected()
			return nil
		})
		if err != nil {
			return total, err
		}
		s.bodies.at, s.bodies.seq = at, seq
		total += n
		if rows < 1000 {
			return total, nil
		}
	}
}

// jsonInts is seqs as a JSON array, one parameter for an IN list.
func jsonInts(seqs []any) string {
	b := make([]byte, 0, 8*len(seqs)+2)
	b = append(b, '[')
	for i, v := range seqs {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", v)
	}
	return string(append(b, ']'))
}

// KeptDeliveries calls fn with each delivery of k received at or after
// since whose body is still kept, with its body, in arrival order (any
// state): what `mergegate export` writes out. It reads in batches of 500,
// each its own read.
func (s *Store) KeptDeliveries(ctx context.Context, k Key, since time.Time, fn func(Delivery) error) error {
	var after int64
	for {
		ds, err := s.deliveries(ctx, true, `JOIN delivery_bodies kept ON kept.seq = d.seq
			WHERE d.tenant = ? AND d.repo = ? AND d.received_at >= ? AND d.seq > ? ORDER BY d.seq LIMIT 500`,
			k.Tenant, k.Repo, since.UnixMilli(), after)
		if err != nil {
			return err
		}
		for _, d := range ds {
			if err := fn(d); err != nil {
				return err
			}
			after = d.Seq
		}
		if len(ds) < 500 {
			return nil
		}
	}
}
