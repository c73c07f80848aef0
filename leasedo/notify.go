package leasedo

import (
	"context"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Several replicas on one PostgreSQL database find out from it when a
// repository's lease is given back, so that one which found it held
// resumes at once instead of at its next retry: every transaction that
// deletes a lease row sends NOTIFY on the database's channel (delivered at
// its commit, to every replica's listening connection, its own included),
// and each DB listens on a connection of its own. On SQLite, one process,
// the release calls the callbacks itself after the commit. Notifications
// are a shortcut, not the mechanism: one lost (the listening connection
// broken, a replica starting) only delays the work until the next retry
// or the engine's sweep, a few seconds later.

// releaseHub holds the callbacks told of released leases.
type releaseHub struct {
	mu        sync.Mutex
	next      int
	released  map[int]func(Key)
	listening map[int]func()
}

// OnRelease registers fn, called with the key of every lease released
// (Release, ReleaseAny, a dead lease force-released), by this process or,
// on PostgreSQL, by any replica; and listening, called each time the
// listening connection (re)connects, when notifications may have been
// missed (nil: none; SQLite never calls it). The callbacks run on the
// listener's goroutine (PostgreSQL) or the releasing one (SQLite) and must
// not block. The returned func unregisters them.
func (db *DB) OnRelease(fn func(Key), listening func()) (unregister func()) {
	h := &db.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released == nil {
		h.released, h.listening = map[int]func(Key){}, map[int]func(){}
	}
	id := h.next
	h.next++
	h.released[id] = fn
	if listening != nil {
		h.listening[id] = listening
	}
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.released, id)
		delete(h.listening, id)
	}
}

func (h *releaseHub) fire(k Key) {
	h.mu.Lock()
	fns := make([]func(Key), 0, len(h.released))
	for _, fn := range h.released {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn(k)
	}
}

func (h *releaseHub) fireListening() {
	h.mu.Lock()
	fns := make([]func(), 0, len(h.listening))
	for _, fn := range h.listening {
		fns = append(fns, fn)
	}
	h.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// released is said by a transaction that deleted k's lease row: on
// PostgreSQL a NOTIFY, sent with the commit; on SQLite the callbacks,
// after it.
func (db *DB) released(ctx context.Context, tx *wtx, k Key) error {
	if tx.pg {
		_, err := tx.ExecContext(ctx, `SELECT pg_notify(?, ?)`, db.channel, k.Tenant+"/"+k.Repo)
		return err
	}
	tx.afterCommit(func() { db.hub.fire(k) })
	return nil
}

// keyOfPayload reads a notification's payload: the tenant (an
// installation id, no slash) and the repository after the first slash.
func keyOfPayload(p string) (Key, bool) {
	tenant, repo, ok := strings.Cut(p, "/")
	return Key{Tenant: tenant, Repo: repo}, ok && tenant != ""
}

// channelFor is the NOTIFY channel of the schema mergegate's tables are
// in: two deployments sharing a database in different schemas (or tests)
// do not wake each other. A channel is an identifier: at most 63 bytes.
func channelFor(schema string) string {
	c := "mergegate_released_" + schema
	if len(c) > 63 {
		c = c[:63]
	}
	return c
}

// listen keeps a connection of its own LISTENing on db's channel until
// ctx ends, reconnecting with a backoff (1 s, doubling to 10 s) when the
// connection breaks or the server is away.
func (db *DB) listen(ctx context.Context, cfg *pgx.ConnConfig) {
	defer close(db.listenDone)
	backoff := time.Second
	for ctx.Err() == nil {
		if db.listenOnce(ctx, cfg) {
			backoff = time.Second // it was up: reconnect soon
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

// listenOnce connects, LISTENs and passes notifications on until the
// connection fails; it reports whether it got as far as listening.
func (db *DB) listenOnce(ctx context.Context, cfg *pgx.ConnConfig) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	c, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return false
	}
	defer c.Close(context.WithoutCancel(ctx)) //nolint:errcheck
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{db.channel}.Sanitize()); err != nil {
		return false
	}
	db.hub.fireListening()
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if k, ok := keyOfPayload(n.Payload); ok {
			db.hub.fire(k)
		}
	}
}

// claimKey is a PostgreSQL transaction's claim on k's repository: a
// transaction-scoped advisory lock, tried without waiting (as FOR UPDATE
// SKIP LOCKED would). Applying deliveries (Drain) tries it, taking a
// lease (Acquire) waits for it, so across replicas they exclude each
// other: a drain never applies deliveries while another replica takes the
// lease, and two replicas never drain one repository at once. The lock is given back at commit or rollback, so a
// replica that dies holds nothing. A lease row could not serve as the
// claim: it exists only while a lease is held (the protocol deletes it on
// release). Two keys whose hashes collide only claim each other too.
func claimKey(ctx context.Context, tx *wtx, k Key) (bool, error) {
	var ok bool
	err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(?)`, claimID(k)).Scan(&ok)
	return ok, err
}

// waitClaim is claimKey waiting for the claim: taking a lease (Acquire)
// waits out another replica's drain or acquire of k, one short
// transaction, and then reads the lease as it left it, so a racing
// acquirer that lost is told who won.
func waitClaim(ctx context.Context, tx *wtx, k Key) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?)`, claimID(k))
	return err
}

// claimID is k's advisory lock: any bigint serves, kept positive for
// whoever reads pg_locks.
func claimID(k Key) int64 {
	h := fnv.New64a()
	h.Write([]byte(k.Tenant)) //nolint:errcheck
	h.Write([]byte{0})        //nolint:errcheck
	h.Write([]byte(k.Repo))   //nolint:errcheck
	return int64(h.Sum64() >> 1)
}

// busy is a drain's answer while another replica holds k's claim: it is
// busy with k for the length of a short transaction.
func busy(k Key) *LockedError {
	return &LockedError{Key: k, HeldBy: "another replica (applying deliveries or taking the lease)"}
}
