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
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed *.sql postgres/*.sql
var files embed.FS

// Dialect names a migration set: SQLite's (the files here) or
// PostgreSQL's (postgres/). Each set is numbered from 1 on its own and
// recorded in its database's schema_version alike.
type Dialect int

const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) dir() string {
	if d == Postgres {
		return "postgres"
	}
	return "."
}

// Migration is one numbered schema step.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded SQLite migrations in version order.
func All() ([]Migration, error) { return AllOf(SQLite) }

// AllOf returns the embedded migrations of d in version order.
func AllOf(d Dialect) ([]Migration, error) {
	entries, err := fs.ReadDir(files, d.dir())
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration %q: want NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: bad version number", name)
		}
		body, err := files.ReadFile(path.Join(d.dir(), name))
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

// Latest is the SQLite schema version this binary knows.
func Latest() int { return LatestOf(SQLite) }

// LatestOf is the schema version of d this binary knows.
func LatestOf(d Dialect) int {
	all, err := AllOf(d)
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

// postgresLockKey is the advisory lock under which replicas migrate a
// PostgreSQL database: the first to start applies each step, the others
// wait on the lock and then find the version already recorded. (Any
// constant would do; this one reads "mergegat".)
const postgresLockKey = 0x6d65726765676174

// VersionPostgres reads the schema version recorded in a PostgreSQL
// database (0 for a new one), in the schema the connection's search_path
// names first.
func VersionPostgres(ctx context.Context, db *sql.DB) (int, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v sql.NullInt64
	if err := db.QueryRowContext(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return int(v.Int64), nil
}

// ApplyPostgres brings a PostgreSQL database up to the latest version of
// the postgres/ set, one transaction per migration, all under a
// session-level advisory lock, so that replicas starting together apply
// each step once.
func ApplyPostgres(ctx context.Context, db *sql.DB) (from, to int, err error) {
	all, err := AllOf(Postgres)
	if err != nil {
		return 0, 0, err
	}
	latest := all[len(all)-1].Version
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(postgresLockKey)); err != nil {
		return 0, 0, fmt.Errorf("migrate: advisory lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(postgresLockKey)) //nolint:errcheck // the session's end releases it too
	if from, err = VersionPostgres(ctx, db); err != nil {
		return 0, 0, err
	}
	if from > latest {
		return from, from, &TooNewError{DB: from, Binary: latest}
	}
	for _, m := range all {
		if err := applyOnePostgres(ctx, conn, m); err != nil {
			return from, 0, err
		}
	}
	to, err = VersionPostgres(ctx, db)
	return from, to, err
}

func applyOnePostgres(ctx context.Context, conn *sql.Conn, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migration %s: schema_version: %w", m.Name, err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM schema_version WHERE version = $1`, m.Version).Scan(&have); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if have > 0 {
		return nil
	}
	// Without arguments the statement goes by the simple protocol, which
	// takes a file of several statements.
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES ($1, $2, $3)`, m.Version, m.Name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migration %s: record version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}
