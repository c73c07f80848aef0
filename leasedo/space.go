package leasedo

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"
)

// The database gives its free pages back to the filesystem in small steps
// (incremental auto-vacuum): pruned deliveries and dropped bodies leave
// free pages, which SQLite reuses for new rows, and the free pages beyond
// freeSlack of the file are returned by FreePages, a step at a time on the
// writer's turn, so that ingest never waits long behind it.

// autoVacuumIncremental is PRAGMA auto_vacuum's value for INCREMENTAL.
const autoVacuumIncremental = 2

// freeSlack: free pages up to 1/freeSlack of the file are kept for the
// rows to come (in steady use, what the last prune freed is what the next
// minutes fill); only the rest is given back. Giving back every free page
// would move pages about after each prune only to grow the file again.
const freeSlack = 16

// FreeStepPages is the most pages one FreePages step moves or truncates:
// 1 MiB of 4 KiB pages, a few milliseconds of the writer.
const FreeStepPages = 256

// Conversion reports the one rewrite (VACUUM) that turns incremental
// auto-vacuum on in a database created without it.
type Conversion struct {
	Done       bool          // false: before the rewrite starts
	Bytes      int64         // the file's size before
	BytesAfter int64         // after (Done)
	Took       time.Duration // (Done)
	Err        error         // (Done) the rewrite failed; the database is as it was
	// Running marks a report while the rewrite goes on (about once a
	// second): Written is what it has written to the WAL so far, which
	// ends near Bytes.
	Running bool
	Written int64
}

// convertSample is how often a running conversion reports its progress.
const convertSample = time.Second

// convertAutoVacuum turns incremental auto-vacuum on in a database that was
// created without it. SQLite allows that only by rebuilding the file
// (VACUUM, outside any transaction, on the writer connection before
// anything else uses it): it rewrites every live page once through the WAL
// and leaves the file at the size of what it holds. A new database has it
// from its first table (the DSN sets it before the migrations run), so
// this runs at most once per database.
func (db *DB) convertAutoVacuum(ctx context.Context, report func(Conversion)) error {
	var mode int
	if err := db.w.QueryRowContext(ctx, `PRAGMA auto_vacuum`).Scan(&mode); err != nil {
		return fmt.Errorf("auto_vacuum: %w", err)
	}
	if mode == autoVacuumIncremental {
		return nil
	}
	if mode != 0 { // FULL switches to INCREMENTAL without a rebuild
		_, err := db.w.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`)
		return err
	}
	var c Conversion
	c.Bytes, _ = db.Size()
	if report != nil {
		report(c)
	}
	start := time.Now()
	_, err := db.w.ExecContext(ctx, `PRAGMA auto_vacuum = INCREMENTAL`)
	if err == nil {
		stop := db.sampleWAL(c.Bytes, report)
		_, err = db.w.ExecContext(ctx, `VACUUM`)
		stop()
	}
	if err == nil {
		// The rewrite went through the WAL: copy it back and start it
		// over, so that the file is its new size at once.
		_, err = db.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	}
	c.Done, c.Took, c.Err = true, time.Since(start), err
	c.BytesAfter, _ = db.Size()
	if report != nil {
		report(c)
	}
	if err != nil {
		return fmt.Errorf("turn incremental auto-vacuum on (VACUUM): %w", err)
	}
	return nil
}

// sampleWAL reports the size of the WAL file every convertSample while
// VACUUM writes through it, until stop is called.
func (db *DB) sampleWAL(total int64, report func(Conversion)) (stop func()) {
	if report == nil {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(convertSample)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if fi, err := os.Stat(db.path + "-wal"); err == nil {
					report(Conversion{Bytes: total, Running: true, Written: fi.Size()})
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// Pages reports the database's pages: in the file, and free (on the
// freelist, reused before the file grows).
// PostgreSQL keeps its own free space (VACUUM): none, there.
func (db *DB) Pages(ctx context.Context) (total, free int64, err error) {
	if db.pg {
		return 0, 0, nil
	}
	if err := db.r.QueryRowContext(ctx, `SELECT page_count, freelist_count FROM pragma_page_count(), pragma_freelist_count()`).Scan(&total, &free); err != nil {
		return 0, 0, fmt.Errorf("page count: %w", err)
	}
	return total, free, nil
}

// FreePages gives one step of free pages (at most FreeStepPages) back to
// the filesystem, in one short transaction on the writer's turn, when more
// than 1/freeSlack of the file is free; it reports how many pages it gave
// back and whether another step would give back more. Call it until more
// is false: between steps every waiting commit gets the writer first.
// On PostgreSQL, autovacuum does this: it gives nothing back.
func (db *DB) FreePages(ctx context.Context) (freed int64, more bool, err error) {
	if db.pg {
		return 0, false, nil
	}
	err = db.write(ctx, func(tx *wtx) error {
		total, free, err := pagesOf(ctx, tx.Tx)
		if err != nil {
			return err
		}
		n := min(free-total/freeSlack, FreeStepPages)
		if n <= 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA incremental_vacuum(%d)`, n)); err != nil {
			return fmt.Errorf("incremental vacuum: %w", err)
		}
		total2, free2, err := pagesOf(ctx, tx.Tx)
		if err != nil {
			return err
		}
		freed = total - total2
		more = freed > 0 && free2-total2/freeSlack > 0
		return nil
	})
	return freed, more, err
}

func pagesOf(ctx context.Context, q *sql.Tx) (total, free int64, err error) {
	if err := q.QueryRowContext(ctx, `SELECT page_count, freelist_count FROM pragma_page_count(), pragma_freelist_count()`).Scan(&total, &free); err != nil {
		return 0, 0, fmt.Errorf("page count: %w", err)
	}
	return total, free, nil
}

// PageSize is the database's page size in bytes.
func (db *DB) PageSize() int64 { return db.pageSize }
