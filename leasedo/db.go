package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/mergegate/mergegate/migrations"
	"modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is mergegate's SQLite database: one writer connection whose
// transactions begin IMMEDIATE (a write never fails with SQLITE_BUSY on a
// read-to-write upgrade; other processes wait on the busy timeout), and a
// small pool of read connections that see WAL snapshots.
//
// Or it is a PostgreSQL database (Open with a postgres:// URL): w and r
// are then the same pool of connections (pgxpool), the SQLite-only parts
// (checkpointer, auto-vacuum, PRAGMAs) are off, and statements are
// rebound for PostgreSQL (dialect.go).
type DB struct {
	path     string // the file; for PostgreSQL, the server and database, without password
	pg       bool
	pool     *pgxpool.Pool // PostgreSQL only
	clock    *dbClock      // PostgreSQL only: the server's clock (dbclock.go)
	w        *conn
	r        *conn
	ckpt     *sql.DB // background WAL checkpoints, off the writer's path
	pageSize int64   // set at Open, read by the checkpointer
	walLimit int64   // walRestartBytes; smaller in tests
	stop     chan struct{}
	done     chan struct{}
	turns    writerTurns // orders the single writer's transactions
	stmts    *stmtCache  // the writer's prepared statements
	// commits counts the writer's commits: the checkpointer skips its
	// pass when nothing was committed since the last one.
	commits atomic.Int64
	// writeFailure is the storage error of the last write that failed
	// for want of storage (disk full, read-only, I/O), until a write
	// commits again (GET /healthz).
	writeFailure atomic.Pointer[WriteFailure]
	// probe is the last write probe's outcome (PostgreSQL, ProbeWrite).
	probe writeProbe

	// Released leases (notify.go): the callbacks, and on PostgreSQL the
	// NOTIFY channel and its listener.
	hub        releaseHub
	channel    string
	stopListen context.CancelFunc
	listenDone chan struct{}
}

// WriteFailure is a write that the storage refused.
type WriteFailure struct {
	Err error
	At  time.Time // wall clock, for the operator
}

// LastWriteFailure returns the storage error of the last write when it
// failed for want of storage, or nil once a write committed after it.
func (db *DB) LastWriteFailure() *WriteFailure { return db.writeFailure.Load() }

// noteWrite keeps the outcome of a write: a storage failure is kept, a
// commit forgets it. Other errors (a lease held, a bad field) say nothing
// about the storage.
func (db *DB) noteWrite(err error) {
	db.lostConnection(err)
	switch {
	case err == nil:
		if db.writeFailure.Load() != nil {
			db.writeFailure.Store(nil)
		}
	case IsStorageError(err):
		db.writeFailure.Store(&WriteFailure{Err: err, At: time.Now()})
	}
}

// IsStorageError reports whether err is SQLite saying that the database
// cannot be written: full, read-only, an I/O error, a file it cannot open,
// or a damaged file.
//
// On PostgreSQL it is the server or the way to it failing (isPostgresStorageError).
func IsStorageError(err error) bool {
	if isPostgresStorageError(err) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_PERM:
		return true
	}
	return false
}

// writerTurns hands the writer connection to one transaction at a time, in
// arrival order, except that "first" requests (the inbox's group commits,
// which a webhook's 202 waits for) go before every waiting ordinary one.
// database/sql alone hands a freed connection to a random waiter: with a
// hundred engine workers queued, a webhook's commit waited behind most of
// them. There is at most one first request at a time (the inbox commits
// from one goroutine), so ordinary writes still get every other turn.
type writerTurns struct {
	mu          sync.Mutex
	held        bool
	first, rest []chan struct{}
}

// acquire waits for the writer.
func (g *writerTurns) acquire(ctx context.Context, first bool) error {
	g.mu.Lock()
	if !g.held {
		g.held = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if first {
		g.first = append(g.first, ch)
	} else {
		g.rest = append(g.rest, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		removed := removeWaiter(&g.first, ch) || removeWaiter(&g.rest, ch)
		g.mu.Unlock()
		if !removed { // handed over meanwhile: pass it on
			g.release()
		}
		return ctx.Err()
	}
}

// release hands the writer to the next waiter, or frees it.
func (g *writerTurns) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*[]chan struct{}{&g.first, &g.rest} {
		if len(*q) > 0 {
			ch := (*q)[0]
			(*q)[0] = nil
			*q = (*q)[1:]
			close(ch)
			return
		}
	}
	g.held = false
}

func removeWaiter(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}

// checkpointEvery is how often the WAL is copied back into the database
// while commits come in (an idle database is not visited). The writer's
// automatic checkpoint is off: it ran inside a commit, on the path of the
// webhook's 202, and a pass fsyncs the WAL and the database.
const checkpointEvery = time.Second

// Options tune how the database is opened.
type Options struct {
	// Sync is SQLite's synchronous setting: "normal" (default; in WAL mode a
	// power loss may roll back the last transactions, a process crash loses
	// nothing) or "full" (every commit is fsynced).
	Sync string
	// BusyTimeout is how long a writer waits for another process's lock.
	BusyTimeout time.Duration
	// ReadOnly opens without migrating or writing (for inspection tools).
	ReadOnly bool
	// OnConvert is told before and after Open rewrites a database created
	// without incremental auto-vacuum (once per database: Conversion);
	// nil: not told.
	OnConvert func(Conversion)
}

// Open opens (creating if needed) the SQLite file at path and applies the
// embedded migrations. A database newer than this binary is refused.
//
// A path that is a PostgreSQL connection string (IsPostgresURL: a
// postgres:// URL or libpq's key=value form) opens that database instead,
// and applies the postgres/ migrations; Sync and BusyTimeout do not apply
// to it.
func Open(ctx context.Context, path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
	}
	if IsPostgresURL(path) {
		return openPostgres(ctx, path, opt)
	}
	sync := strings.ToUpper(opt.Sync)
	if sync == "" {
		sync = "NORMAL"
	}
	if sync != "NORMAL" && sync != "FULL" {
		return nil, fmt.Errorf("open database: sync %q: want normal or full", opt.Sync)
	}
	busy := opt.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	if !opt.ReadOnly {
		if err := createPrivate(path); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	}
	q := url.Values{}
	// SQLite's default 4 KiB pages, set before the switch to WAL (it only
	// takes effect on a new file). A commit writes every page it touched
	// whole, and applying a delivery touches ~19 (rows and index entries
	// of deliveries, events, queue, audit): with 16 KiB pages that would
	// be 300 KB of WAL per delivery, copied back again by the checkpoints.
	q.Add("_pragma", "page_size(4096)")
	// Incremental auto-vacuum, likewise before the first table: free
	// pages can then be given back to the filesystem (space.go). An
	// older database is converted once, below.
	q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	// The WAL file keeps its blocks when it starts over (rewriting them
	// allocates no new blocks, and allocation costs the filesystem a
	// journal commit on the next fsync), unless a burst left it past four
	// times the bound.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", 4*walRestartBytes))
	q.Add("_txlock", "immediate")
	dsn := fileURI(path) + "?" + q.Encode()

	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	w.SetMaxOpenConns(1) // the single writer
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := pingRetryBusy(ctx, w, busy); err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}

	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", fileURI(path)+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)

	db := &DB{path: path, w: &conn{DB: w}, r: &conn{DB: r}, stmts: newStmtCache(), walLimit: walRestartBytes}
	if opt.ReadOnly {
		return db, nil
	}
	if _, _, err := migrations.Apply(ctx, w); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	if err := db.convertAutoVacuum(ctx, opt.OnConvert); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if err := w.QueryRowContext(ctx, `PRAGMA page_size`).Scan(&db.pageSize); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: page size: %w", path, err)
	}
	cq := url.Values{}
	cq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	cq.Add("_pragma", "synchronous("+sync+")")
	if db.ckpt, err = sql.Open("sqlite", fileURI(path)+"?"+cq.Encode()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s for checkpoints: %w", path, err)
	}
	db.ckpt.SetMaxOpenConns(1)
	db.stop, db.done = make(chan struct{}), make(chan struct{})
	go db.checkpointer()
	return db, nil
}

// createPrivate creates the database file, if it is not there, readable
// and writable by its owner only (0600, whatever the umask): it holds
// every delivery's payload. SQLite gives the -wal and -shm files it
// creates the database file's mode. An existing file keeps its mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(0o600) // the umask may have taken bits away from 0600
}

// checkpointer copies the WAL back into the database in the background,
// once after start (migrations may have written) and then on each tick
// that follows commits.
func (db *DB) checkpointer() {
	defer close(db.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	last := int64(-1)
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			if n := db.commits.Load(); n != last {
				last = n
				db.checkpoint()
			}
		}
	}
}

// walRestartBytes bounds the WAL. A PASSIVE checkpoint copies it back but
// never starts it over: SQLite does that at a write transaction that
// begins while every frame is copied back and no reader is in the WAL,
// which under steady load (a commit landing during every pass) never
// happens, and the WAL grows without end.
const walRestartBytes = 64 << 20

// checkpoint copies the WAL back into the database file with a PASSIVE
// pass, which never blocks a writer or waits for a reader. Past
// walLimit, it runs a second pass while it holds the writer's turn: no
// commit can add frames meanwhile, so every frame is copied (unless a
// reader still needs some: the next tick tries again) and the next
// commit starts the WAL over. The first pass left little for the second
// to copy and sync.
func (db *DB) checkpoint() {
	var busy, frames, copied int64
	if err := db.ckpt.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
		return // tried again next tick
	}
	if frames*db.pageSize <= db.walLimit {
		return
	}
	if err := db.turns.acquire(context.Background(), false); err != nil {
		return
	}
	defer db.turns.release()
	db.ckpt.QueryRow(`PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied) //nolint:errcheck // tried again next tick
}

// pingRetryBusy opens the first writer connection, which switches a new
// file to WAL. Two processes doing so at once deadlock (SHARED→EXCLUSIVE)
// and SQLite answers one of them SQLITE_BUSY without calling the busy
// handler, so that case is retried within the busy timeout.
func pingRetryBusy(ctx context.Context, w *sql.DB, busy time.Duration) error {
	deadline := time.Now().Add(busy)
	for {
		err := w.PingContext(ctx)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// Path is the database file. For PostgreSQL it is "": there is no file
// of ours (Describe names the database).
func (db *DB) Path() string {
	if db.pg {
		return ""
	}
	return db.path
}

// Describe names the database for messages: the file, or the PostgreSQL
// server and database (without a password).
func (db *DB) Describe() string { return db.path }

// Size is what the database takes on disk: its file and its WAL (the
// -shm index is a few pages and is left out). For PostgreSQL, the size of
// the database (pg_database_size).
func (db *DB) Size() (int64, error) {
	if db.pg {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var n int64
		if err := db.r.QueryRowContext(ctx, `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
			return 0, fmt.Errorf("database size: %w", err)
		}
		return n, nil
	}
	var n int64
	for _, p := range []string{db.path, db.path + "-wal"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) && p != db.path {
			continue // no WAL after a clean close
		}
		if err != nil {
			return 0, fmt.Errorf("database size: %w", err)
		}
		n += fi.Size()
	}
	return n, nil
}

// Close closes both pools; the WAL is checkpointed by SQLite on last close.
func (db *DB) Close() error {
	if db.ckpt != nil {
		close(db.stop)
		<-db.done
		// Fold the WAL into the database file on a clean shutdown.
		db.ckpt.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`) //nolint:errcheck
		db.ckpt.Close()
		db.ckpt = nil
	}
	db.stmts.close()
	if db.pg {
		if db.stopListen != nil {
			db.stopListen()
			<-db.listenDone
		}
		db.stopClock()
		err := db.w.Close()
		db.pool.Close()
		if err != nil {
			return fmt.Errorf("close database: %w", err)
		}
		return nil
	}
	errR := db.r.Close()
	errW := db.w.Close()
	if errW != nil {
		return fmt.Errorf("close database: %w", errW)
	}
	if errR != nil {
		return fmt.Errorf("close database: %w", errR)
	}
	return nil
}

// Ping checks that the database answers (GET /healthz).
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.r.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("database: %w", err)
	}
	return nil
}

// SchemaVersion reports the schema version recorded in the database.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	if db.pg {
		return migrations.VersionPostgres(ctx, db.r.DB)
	}
	return migrations.Version(ctx, db.r.DB)
}

// LimitPages caps the database at its current size plus pages pages
// (PRAGMA max_page_count on the writer connection), so that a write that
// needs more fails as on a full disk (SQLITE_FULL); pages < 0 lifts the
// cap. For fault tests: as root, a read-only file or folder does not stop
// writes, and a full filesystem needs a mount.
func (db *DB) LimitPages(ctx context.Context, pages int) error {
	if db.pg {
		return errors.New("limit pages: SQLite only")
	}
	return db.write(ctx, func(tx *wtx) error {
		limit := int64(4294967294) // SQLite's default maximum
		if pages >= 0 {
			var n int64
			if err := tx.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&n); err != nil {
				return fmt.Errorf("page count: %w", err)
			}
			limit = n + int64(pages)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, limit)); err != nil {
			return fmt.Errorf("max page count: %w", err)
		}
		return nil
	})
}

// IntegrityCheck runs PRAGMA integrity_check and returns its first line.
//
// On PostgreSQL the server keeps its own checks (data checksums,
// amcheck): it answers "ok" once the database answers.
func (db *DB) IntegrityCheck(ctx context.Context) (string, error) {
	if db.pg {
		if err := db.Ping(ctx); err != nil {
			return "", fmt.Errorf("integrity check: %w", err)
		}
		return "ok", nil
	}
	var s string
	if err := db.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&s); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	return s, nil
}

// write runs fn in one IMMEDIATE transaction on the writer connection.
func (db *DB) write(ctx context.Context, fn func(tx *wtx) error) error {
	return db.writeInTurn(ctx, false, fn)
}

// writeFirst is write for the inbox's group commits: a webhook waits on
// them, so they go before every write already waiting (the engine's).
func (db *DB) writeFirst(ctx context.Context, fn func(tx *wtx) error) error {
	return db.writeInTurn(ctx, true, fn)
}

func (db *DB) writeInTurn(ctx context.Context, first bool, fn func(tx *wtx) error) error {
	if err := db.turns.acquire(ctx, first); err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	defer db.turns.release()
	if db.stmts.pending() {
		db.stmts.warm(ctx, db.w.DB) // the writer is free: no transaction is open
	}
	var tx *wtx
	if db.pg {
		// PostgreSQL: READ COMMITTED, the caller's context (pgx prepares
		// and caches the statements itself). A lease row's writes lock
		// it until the commit: the fencing of lease.go.
		sqlTx, err := db.w.BeginTx(ctx, nil)
		if err != nil {
			db.noteWrite(err)
			return fmt.Errorf("begin write: %w", err)
		}
		tx = &wtx{Tx: sqlTx, pg: true}
	} else {
		sqlTx, err := db.w.BeginTx(context.WithoutCancel(ctx), nil) // see wtx
		if err != nil {
			db.noteWrite(err)
			return fmt.Errorf("begin write: %w", err)
		}
		tx = &wtx{Tx: sqlTx, stmts: db.stmts}
	}
	// Deferred, so a panic in fn rolls back too and frees the writer.
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		db.noteWrite(err)
		return err
	}
	if err := tx.Commit(); err != nil {
		db.noteWrite(err)
		return &commitError{err}
	}
	db.commits.Add(1)
	db.noteWrite(nil)
	for _, fn := range tx.after {
		fn()
	}
	return nil
}

// savepoint runs fn under a savepoint of tx: fn's error rolls back fn's
// writes alone and is returned as fnErr, and the transaction goes on. err
// is a savepoint statement's own failure: the transaction is not usable.
func savepoint(ctx context.Context, tx *wtx, fn func() error) (fnErr, err error) {
	if _, err := tx.ExecContext(ctx, `SAVEPOINT sp`); err != nil {
		return nil, fmt.Errorf("savepoint: %w", err)
	}
	if fnErr = fn(); fnErr != nil {
		if _, err := tx.ExecContext(ctx, `ROLLBACK TO sp`); err != nil {
			return fnErr, fmt.Errorf("roll back: %w (after %v)", err, fnErr)
		}
	}
	if _, err := tx.ExecContext(ctx, `RELEASE sp`); err != nil {
		return fnErr, fmt.Errorf("release savepoint: %w", err)
	}
	return fnErr, nil
}

// readOnWriter runs fn's reads on the writer connection between its
// transactions: its page cache holds what the last commits wrote, where a
// reader's starts cold after every commit.
func (db *DB) readOnWriter(ctx context.Context, fn func(q querier) error) error {
	if err := db.turns.acquire(ctx, false); err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer db.turns.release()
	return fn(db.w)
}

// read runs fn in one read transaction (a consistent snapshot).
func (db *DB) read(ctx context.Context, fn func(tx *wtx) error) error {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	return fn(&wtx{Tx: tx, pg: db.pg})
}

// fileURI is path as SQLite's file: URI: '%', '?' and '#' are escaped, so
// that a folder named "a#b" or "why?" opens the file it names, not another
// one cut at the character (the driver splits at the first '?', SQLite
// ends the path at '#' and decodes %XX).
func fileURI(path string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3F", "#", "%23").Replace(path)
}
