package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"time"

	"github.com/mergegate/mergegate/migrations"
	"modernc.org/sqlite" // pure-Go SQLite driver, registered as "sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DB is mergegate's SQLite database: one writer connection whose
// transactions begin IMMEDIATE (a write never fails with SQLITE_BUSY on a
// read-to-write upgrade; other processes wait on the busy timeout), and a
// small pool of read connections that see WAL snapshots.
type DB struct {
	path string
	w    *sql.DB
	r    *sql.DB
	ckpt *sql.DB // background WAL checkpoints, off the writer's path
	stop chan struct{}
	done chan struct{}
}

// checkpointEvery is how often the WAL is copied back into the database.
// The writer's automatic checkpoint is off: it ran inside a commit, on the
// path of the webhook's 202.
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
}

// Open opens (creating if needed) the SQLite file at path and applies the
// embedded migrations. A database newer than this binary is refused.
func Open(ctx context.Context, path string, opt Options) (*DB, error) {
	if path == "" {
		return nil, errors.New("open database: empty path")
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
	q := url.Values{}
	// 16 KiB pages, set before the switch to WAL (it only takes effect on a
	// new file): a 24 KB delivery spans 2 pages instead of 7, so a group
	// commit writes a third of the WAL frames (one write call each).
	q.Add("_pragma", "page_size(16384)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Add("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()

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
	r, err := sql.Open("sqlite", "file:"+path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open database %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)

	db := &DB{path: path, w: w, r: r}
	if opt.ReadOnly {
		return db, nil
	}
	if _, _, err := migrations.Apply(ctx, w); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	cq := url.Values{}
	cq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	cq.Add("_pragma", "synchronous("+sync+")")
	if db.ckpt, err = sql.Open("sqlite", "file:"+path+"?"+cq.Encode()); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s for checkpoints: %w", path, err)
	}
	db.ckpt.SetMaxOpenConns(1)
	db.stop, db.done = make(chan struct{}), make(chan struct{})
	go db.checkpointer()
	return db, nil
}

// checkpointer copies the WAL back into the database in the background.
// PASSIVE never blocks the writer or readers; what it cannot copy yet it
// copies next time.
func (db *DB) checkpointer() {
	defer close(db.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			db.ckpt.Exec(`PRAGMA wal_checkpoint(PASSIVE)`) //nolint:errcheck // retried next tick
		}
	}
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

// Path is the database file.
func (db *DB) Path() string { return db.path }

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
	return migrations.Version(ctx, db.r)
}

// IntegrityCheck runs PRAGMA integrity_check and returns its first line.
func (db *DB) IntegrityCheck(ctx context.Context) (string, error) {
	var s string
	if err := db.r.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&s); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	return s, nil
}

// write runs fn in one IMMEDIATE transaction on the writer connection.
func (db *DB) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin write: %w", err)
	}
	// Deferred, so a panic in fn rolls back too and frees the writer.
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// read runs fn in one read transaction (a consistent snapshot).
func (db *DB) read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	return fn(tx)
}
