package leasedo

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgreSQL going away: what the pool does about it (docs/operations.md,
// "When the database goes away").
//
//   - A new connection gives up after pgConnectTimeout per host (unless
//     the DSN sets connect_timeout): a server that is down, or a host that
//     drops packets, fails a webhook's commit in seconds, within GitHub's
//     10 s, instead of after the kernel's two minutes.
//   - A connection whose server went silent (a failover that moved an
//     address, a cable) is given up by the kernel: TCP keep-alives while
//     it is idle, TCP_USER_TIMEOUT while data waits to be acknowledged.
//     Without them a write on it waited for the retransmissions, about a
//     quarter of an hour.
//   - A connection found lost (the server restarted, the backend was
//     terminated) empties the pool (Pool.Reset): when one was lost they
//     usually all were, and the next statement would otherwise be handed
//     another dead one. The next statements connect anew: no restart of
//     mergegate is needed. A DSN of several hosts with
//     target_session_attrs=read-write connects to whichever is the primary
//     now.
//   - A delivery's enqueue, its wait for the committer and the commit
//     together, is bounded by inboxCommitTimeout. A group commit whose
//     connection was lost before the COMMIT was sent (nothing can have
//     been committed) is tried once more on a new connection. A COMMIT whose
//     answer was lost is not tried again: the delivery is answered 503,
//     and GitHub's redelivery, with the same delivery id, is recognised as
//     a duplicate if it had committed.
const (
	pgConnectTimeout   = 5 * time.Second
	pgPingTimeout      = 2 * time.Second
	pgKeepAliveIdle    = 10 * time.Second
	pgKeepAliveEvery   = 5 * time.Second
	pgKeepAliveCount   = 3
	pgUserTimeout      = 15 * time.Second
	inboxCommitTimeout = 8 * time.Second
)

// configureFaults sets the pool's timeouts and its dialer (see above).
func configureFaults(cfg *pgxpool.Config) {
	cc := cfg.ConnConfig
	if cc.ConnectTimeout <= 0 {
		cc.ConnectTimeout = pgConnectTimeout
	}
	d := &net.Dialer{
		Timeout: cc.ConnectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: pgKeepAliveIdle, Interval: pgKeepAliveEvery, Count: pgKeepAliveCount,
		},
		Control: func(network, _ string, c syscall.RawConn) error {
			if network == "tcp" || network == "tcp4" || network == "tcp6" {
				return setUserTimeout(c, pgUserTimeout)
			}
			return nil
		},
	}
	cc.DialFunc = d.DialContext
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = pgPingTimeout
	}
}

// isConnLost reports whether err says the connection to PostgreSQL is
// lost or could not be made: the server closed it (restart, shutdown,
// pg_terminate_backend), the network failed, or the server does not
// answer a new connection. Not a statement the server refused, nor the
// caller's context ending (a lock waited on too long says nothing about
// the other connections).
func isConnLost(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57P01", "57P02", "57P03": // admin_shutdown (also pg_terminate_backend), crash_shutdown, cannot_connect_now
			return true
		}
		return pe.Code[:2] == "08" // connection exception
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// commitError is a COMMIT that failed: when its connection was lost, the
// transaction may have committed or not.
type commitError struct{ err error }

func (e *commitError) Error() string {
	if isConnLost(e.err) {
		return "commit: connection lost before its answer, it may have committed (a redelivery of the same id is recognised): " + e.err.Error()
	}
	return "commit: " + e.err.Error()
}
func (e *commitError) Unwrap() error { return e.err }

// retryableLost reports whether a write that failed with err may be run
// again as it is: its connection was lost before a COMMIT was sent, so
// the server rolled it back.
func retryableLost(err error) bool {
	var ce *commitError
	return isConnLost(err) && !errors.As(err, &ce)
}

// lostConnection empties the pool after a connection was found lost.
func (db *DB) lostConnection(err error) {
	if db.pg && isConnLost(err) {
		db.pool.Reset()
	}
}

// The write probe of GET /healthz on PostgreSQL: at most one probe in
// flight, its outcome kept for probeFresh so that a load balancer's
// probes do not each cost the server a write.
const (
	probeTimeout = 2 * time.Second
	probeFresh   = 2 * time.Second
)

type writeProbe struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// ErrStandby and ErrReadOnly are the write probe's answers from a server
// that answers but does not take writes.
var (
	ErrStandby  = errors.New("the server is a standby in recovery, read-only (a failover? point --db at the primary, or list every host with target_session_attrs=read-write)")
	ErrReadOnly = errors.New("the server's sessions are read-only (transaction_read_only is on)")
)

// probeSQL assigns a transaction id, which makes its commit a write (a
// commit record in the WAL, waited for by synchronous replication),
// unless the server says beforehand that it would be refused.
const probeSQL = `SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on',
	CASE WHEN pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' THEN 0 ELSE txid_current() END`

// ProbeWrite reports why the database cannot be written now, or nil. On
// PostgreSQL it commits a tiny write (a transaction id), given
// probeTimeout; the outcome is kept for probeFresh after now (the
// caller's clock). A probe that commits ends LastWriteFailure, as any
// write that commits does. On SQLite it is nil: GET /healthz judges the
// file, and LastWriteFailure the writes.
func (db *DB) ProbeWrite(ctx context.Context, now time.Time) error {
	if !db.pg {
		return nil
	}
	p := &db.probe
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.at.IsZero() && now.Before(p.at.Add(probeFresh)) && !now.Before(p.at) {
		return p.err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var standby, readOnly bool
	var xid int64
	err := db.w.DB.QueryRowContext(ctx, probeSQL).Scan(&standby, &readOnly, &xid)
	if isConnLost(err) && ctx.Err() == nil {
		// Found dead (a restart, a failover): the pool is emptied and
		// the probe asks a new connection, which says how it is now.
		db.lostConnection(err)
		err = db.w.DB.QueryRowContext(ctx, probeSQL).Scan(&standby, &readOnly, &xid)
	}
	switch {
	case err != nil && ctx.Err() != nil:
		err = fmt.Errorf("no answer within %s", probeTimeout)
	case err != nil:
		db.noteWrite(err)
	case standby:
		err = ErrStandby
	case readOnly:
		err = ErrReadOnly
	default:
		db.noteWrite(nil)
	}
	if parent.Err() == nil { // not kept when the asker went away
		p.at, p.err = now, err
	}
	return err
}
