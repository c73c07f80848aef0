// Package migrations holds mergegate's schema as versioned SQL files embedded
// in the binary, and applies them in order, each in its own transaction,
// recording the version reached in schema_version.
//
// Rolling upgrades: a migration whose first line is
//
//	-- compatible: <why an older binary can run on it>
//
// only adds what an older binary ignores (a table, a column with a
// default, an index). schema_version records, with each version, whether
// it was compatible and which binary applied it, so that an older binary,
// which does not have the newer files, can tell: on a database whose newer
// versions are all compatible it runs (Newer lists them, for its warning);
// one newer version that is not makes it refuse to start (TooNewError,
// naming the binary that applied it).
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
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
	// Compatible: the file's first line is "-- compatible: <why>" (Why):
	// an older binary may keep running on a database it was applied to.
	Compatible bool
	Why        string
}

// Binary names the mergegate build that applies migrations, recorded
// with each version (cmd/mergegate sets it to its version at start).
var Binary = "dev"

// compatiblePrefix marks a compatible migration's first line.
const compatiblePrefix = "-- compatible:"

// Parse makes a Migration of a file's name (NNNN_name.sql) and text.
func Parse(name, text string) (Migration, error) {
	num, _, ok := strings.Cut(name, "_")
	if !ok || !strings.HasSuffix(name, ".sql") {
		return Migration{}, fmt.Errorf("migration %q: want NNNN_name.sql", name)
	}
	v, err := strconv.Atoi(num)
	if err != nil || v <= 0 {
		return Migration{}, fmt.Errorf("migration %q: bad version number", name)
	}
	m := Migration{Version: v, Name: name, SQL: text}
	first, _, _ := strings.Cut(text, "\n")
	if why, ok := strings.CutPrefix(strings.TrimSpace(first), compatiblePrefix); ok {
		m.Compatible, m.Why = true, strings.TrimSpace(why)
		if m.Why == "" {
			return Migration{}, fmt.Errorf("migration %q: %q says nothing of why an older binary can run on it", name, compatiblePrefix)
		}
	}
	return m, nil
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
		body, err := files.ReadFile(path.Join(d.dir(), name))
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		m, err := Parse(name, string(body))
		if err != nil {
			return nil, err
		}
		out = append(out, m)
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

// TooNewError says the database was migrated by a newer mergegate, with
// a version this binary cannot run on (not marked compatible).
type TooNewError struct {
	DB, Binary int
	// Incompatible are the newer versions not marked compatible, oldest
	// first (those of a binary from before compatible migrations, too).
	Incompatible []Applied
}

func (e *TooNewError) Error() string {
	need := fmt.Sprintf("a mergegate whose `mergegate version` says schema version %d or more", e.DB)
	what := ""
	if len(e.Incompatible) > 0 {
		first := e.Incompatible[0]
		what = fmt.Sprintf(", and %s (version %d) is not compatible with older binaries", first.Name, first.Version)
		if first.Binary != "" && first.Binary != "dev" {
			need = fmt.Sprintf("mergegate %s (which applied it) or newer", first.Binary)
		}
	}
	return fmt.Sprintf("database schema version %d is newer than this binary knows (%d)%s: run %s, or restore a backup taken before the upgrade", e.DB, e.Binary, what, need)
}

// Applied is one version recorded in schema_version.
type Applied struct {
	Version    int
	Name       string
	Compatible bool   // marked "-- compatible:" by the binary that applied it
	Binary     string // that binary's version ("" before this was recorded)
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
//
// A database a newer mergegate migrated is left as it is: when each of
// its newer versions is marked compatible, Apply answers from = to = its
// version and no error (the caller warns: Newer); else *TooNewError.
func Apply(ctx context.Context, db *sql.DB) (from, to int, err error) {
	all, err := All()
	if err != nil {
		return 0, 0, err
	}
	return ApplySet(ctx, db, all)
}

// ApplySet is Apply with the migrations given (tests: a set of N, or N+1).
func ApplySet(ctx context.Context, db *sql.DB, set []Migration) (from, to int, err error) {
	return applySet(ctx, SQLite, db, db, set)
}

// applySet applies set on conn (PostgreSQL: the session holding the
// advisory lock), reading versions through db.
func applySet(ctx context.Context, d Dialect, db *sql.DB, conn execer, set []Migration) (from, to int, err error) {
	if len(set) == 0 {
		return 0, 0, errors.New("migrate: no migrations")
	}
	latest := set[len(set)-1].Version
	if from, err = versionOf(ctx, d, db); err != nil {
		return 0, 0, err
	}
	if from > latest {
		newer, err := newer(ctx, d, db, latest)
		if err != nil {
			return from, from, err
		}
		var bad []Applied
		for _, a := range newer {
			if !a.Compatible {
				bad = append(bad, a)
			}
		}
		if len(bad) > 0 || len(newer) == 0 {
			return from, from, &TooNewError{DB: from, Binary: latest, Incompatible: bad}
		}
		// Every step this binary knows was applied before the newer ones.
		return from, from, nil
	}
	// What is applied already is read first, outside any write
	// transaction: processes opening one file together then contend for
	// the writer only over what is left (each step checked again inside).
	if cols, err := versionColumns(ctx, d, db); err != nil || !cols["compatible"] || !cols["applied_by"] {
		if err := ensureVersionTable(ctx, d, conn); err != nil {
			return from, 0, err
		}
	}
	applied, err := appliedVersions(ctx, d, db)
	if err != nil {
		return from, 0, err
	}
	for _, m := range set {
		if applied[m.Version] {
			continue
		}
		if err := applyOne(ctx, d, conn, m); err != nil {
			return from, 0, err
		}
	}
	to, err = versionOf(ctx, d, db)
	return from, to, err
}

// Newer lists the versions recorded in db above latest (the newest this
// binary knows), oldest first: what a newer mergegate applied. Empty when
// there is none.
func Newer(ctx context.Context, d Dialect, db *sql.DB, latest int) ([]Applied, error) {
	return newer(ctx, d, db, latest)
}

func newer(ctx context.Context, d Dialect, db *sql.DB, latest int) ([]Applied, error) {
	if v, err := versionOf(ctx, d, db); err != nil || v <= latest {
		return nil, err
	}
	cols, err := versionColumns(ctx, d, db)
	if err != nil {
		return nil, err
	}
	q := `SELECT version, name, 0, '' FROM schema_version WHERE version > ? ORDER BY version`
	if cols["compatible"] && cols["applied_by"] {
		// Recorded by a binary that knows compatible migrations; a
		// binary from before records neither (every version incompatible).
		q = `SELECT version, name, compatible, applied_by FROM schema_version WHERE version > ? ORDER BY version`
	}
	rows, err := db.QueryContext(ctx, rebind(d, q), latest)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	var out []Applied
	for rows.Next() {
		var a Applied
		var compat int64
		if err := rows.Scan(&a.Version, &a.Name, &compat, &a.Binary); err != nil {
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		a.Compatible = compat != 0
		out = append(out, a)
	}
	return out, rows.Err()
}

// appliedVersions are the versions recorded in db (none for a new one).
func appliedVersions(ctx context.Context, d Dialect, db *sql.DB) (map[int]bool, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM schema_version`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		out[v] = true
	}
	return out, rows.Err()
}

// execer is what *sql.DB and *sql.Conn both offer.
type execer interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

func versionOf(ctx context.Context, d Dialect, db *sql.DB) (int, error) {
	if d == Postgres {
		return VersionPostgres(ctx, db)
	}
	return Version(ctx, db)
}

// versionColumns are schema_version's columns.
func versionColumns(ctx context.Context, d Dialect, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[string]bool, error) {
	query := `SELECT name FROM pragma_table_info('schema_version')`
	if d == Postgres {
		query = `SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = 'schema_version'`
	}
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read schema_version's columns: %w", err)
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("read schema_version's columns: %w", err)
		}
		cols[c] = true
	}
	return cols, rows.Err()
}

// ensureVersionTable creates schema_version, or adds the columns an older
// binary's has not (whether each version was compatible, and which binary
// applied it). An older binary's INSERT leaves them to their defaults:
// not compatible, binary unknown.
func ensureVersionTable(ctx context.Context, d Dialect, conn execer) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: schema_version: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	create := `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL,
		compatible INTEGER NOT NULL DEFAULT 0, applied_by TEXT NOT NULL DEFAULT '')`
	integer := "INTEGER"
	if d == Postgres {
		create = `CREATE TABLE IF NOT EXISTS schema_version (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL,
		compatible BIGINT NOT NULL DEFAULT 0, applied_by TEXT NOT NULL DEFAULT '')`
		integer = "BIGINT"
	}
	if _, err := tx.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("migrate: schema_version: %w", err)
	}
	cols, err := versionColumns(ctx, d, tx)
	if err != nil {
		return err
	}
	for _, c := range []struct{ name, def string }{
		{"compatible", integer + " NOT NULL DEFAULT 0"},
		{"applied_by", "TEXT NOT NULL DEFAULT ''"},
	} {
		if cols[c.name] {
			continue
		}
		if _, err := tx.ExecContext(ctx, `ALTER TABLE schema_version ADD COLUMN `+c.name+` `+c.def); err != nil {
			return fmt.Errorf("migrate: schema_version: add %s: %w", c.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: schema_version: commit: %w", err)
	}
	return nil
}

// rebind numbers a statement's ? placeholders for PostgreSQL.
func rebind(d Dialect, q string) string {
	if d != Postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func applyOne(ctx context.Context, d Dialect, conn execer, m Migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	var have int
	if err := tx.QueryRowContext(ctx, rebind(d, `SELECT count(*) FROM schema_version WHERE version = ?`), m.Version).Scan(&have); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if have > 0 {
		return nil
	}
	// Without arguments the statement goes by PostgreSQL's simple
	// protocol, which takes a file of several statements.
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	compat := 0
	if m.Compatible {
		compat = 1
	}
	if _, err := tx.ExecContext(ctx, rebind(d, `INSERT INTO schema_version (version, name, applied_at, compatible, applied_by) VALUES (?, ?, ?, ?, ?)`),
		m.Version, m.Name, time.Now().UnixMilli(), compat, Binary); err != nil {
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
// each step once. A database a newer mergegate migrated is answered as
// Apply answers it.
func ApplyPostgres(ctx context.Context, db *sql.DB) (from, to int, err error) {
	all, err := AllOf(Postgres)
	if err != nil {
		return 0, 0, err
	}
	return ApplyPostgresSet(ctx, db, all)
}

// ApplyPostgresSet is ApplyPostgres with the migrations given (tests).
func ApplyPostgresSet(ctx context.Context, db *sql.DB, set []Migration) (from, to int, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(postgresLockKey)); err != nil {
		return 0, 0, fmt.Errorf("migrate: advisory lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(postgresLockKey)) //nolint:errcheck // the session's end releases it too
	return applySet(ctx, Postgres, db, conn, set)
}
