// Package migrations holds mergegate's schema as versioned SQL files embedded
// in the binary, and applies them in order, each in its own transaction,
// recording the version reached in schema_version.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed *.sql
var files embed.FS

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %q: want NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: bad version number", name)
		}
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: versions must run 1, 2, 3… without gaps", m.Name)
		}
	}
	return out, nil
}

// Latest is the schema version this binary knows.
func Latest() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// TooNewError says the database was written by a newer mergegate.
type TooNewError struct{ DB, Binary int }

func (e *TooNewError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this binary knows (%d): run the newer mergegate, or restore a backup taken before the upgrade", e.DB, e.Binary)
}

// Version reads the schema version recorded in db (0 for a new database).
func Version(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type='table' AND name='schema_version'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// Apply brings db up to the latest version, one transaction per migration,
// and returns the versions before and after. db should be the single writer
// connection (transactions begin IMMEDIATE), so two processes starting at once
// do not both apply a step: the second waits, then sees the version moved.
func Apply(ctx context.Context, db *sql.DB) (from, to int, err error) {
	all, err := All()
	if err != nil {
		return 0, 0, err
	}
	latest := all[len(all)-1].Version
	from, err = Version(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	if from > latest {
		return from, from, &TooNewError{DB: from, Binary: latest}
	}
	for _, m := range all {
		if err := applyOne(ctx, db, m); err != nil {
			return from, 0, err
		}
	}
	to, err = Version(ctx, db)
	return from, to, err
}

func applyOne(ctx context.Context, db *sql.DB, m Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("migration %s: schema_version: %w", m.Name, err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_version WHERE version = ?`, m.Version).Scan(&have); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if have > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migration %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}
