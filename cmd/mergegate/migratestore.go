package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver (leasedo uses the same)
	_ "modernc.org/sqlite"             // registered as "sqlite" (leasedo uses the same driver)

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/progress"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

func migrateStoreSettings() []setting {
	return []setting{
		{"from", "", "", "mergegate's SQLite file to copy (read only; stop mergegate first)"},
		{"to", "", "", "PostgreSQL connection string of an empty database to copy into (a postgres:// URL or libpq's key=value form)"},
	}
}

// Tables of the SQLite schema that are not copied as rows: the schema's
// own bookkeeping (each database records its own migrations), and the
// lease fence, which PostgreSQL keeps as a sequence (set, not copied).
var migrateStoreSkip = map[string]bool{"schema_version": true, "lease_fence": true}

// migrateStoreBatch bounds the rows of one INSERT (PostgreSQL takes at
// most 65535 parameters in a statement), and migrateStoreBatchBytes the
// values it holds in memory (payloads may be megabytes each).
const (
	migrateStoreBatch      = 500
	migrateStoreBatchBytes = 16 << 20
)

// migrateStoreResult is what migrateStore copied.
type migrateStoreResult struct {
	Target string // the PostgreSQL database, without its password
	Tables []tableCopy
	Fence  int64 // the lease fence counter carried over
	Took   time.Duration
}

type tableCopy struct {
	Name  string
	Rows  int64
	Bytes int64
}

func migrateStoreCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate-store", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "migrate-store")
	v, err := parseSettings(fs, migrateStoreSettings(), args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	from, to := v["from"], v["to"]
	if from == "" || to == "" {
		return usageError{errors.New("--from (the SQLite file) and --to (the PostgreSQL connection string) are required")}
	}
	if leasedo.IsPostgresURL(from) {
		return usageError{errors.New("--from is mergegate's SQLite file, not a PostgreSQL connection string")}
	}
	if !leasedo.IsPostgresURL(to) {
		return usageError{errors.New("--to is a PostgreSQL connection string (postgres://... or host=... dbname=...), not a file: to copy a SQLite file, use mergegate backup")}
	}
	fi, err := os.Stat(from)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("the database %s does not exist: point --from at mergegate's SQLite file", from)
	case err != nil:
		return fmt.Errorf("the database %s: %w", from, err)
	case fi.IsDir():
		return fmt.Errorf("the database %s is a folder: point --from at mergegate's SQLite file", from)
	}
	fmt.Fprintf(stderr, "mergegate migrate-store: copying %s; mergegate must be stopped meanwhile (what it writes after the copy is not moved)\n", from)
	if wal, err := os.Stat(from + "-wal"); err == nil && wal.Size() > 0 {
		fmt.Fprintf(stderr, "mergegate migrate-store: warning: %s-wal holds %d bytes: mergegate may still be running on %s, or was not shut down cleanly; the copy includes them, but stop mergegate before you start it on PostgreSQL\n", from, wal.Size(), from)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := migrateStoreShowing(ctx, from, to, stderr)
	if err != nil {
		return err
	}
	var rows, bytes int64
	for _, t := range res.Tables {
		fmt.Fprintf(stdout, "  %-16s %8d rows %12d bytes\n", t.Name, t.Rows, t.Bytes)
		rows += t.Rows
		bytes += t.Bytes
	}
	fmt.Fprintf(stdout, "  %-16s %8d (next fencing token %d)\n", "lease fence", res.Fence, res.Fence+1)
	fmt.Fprintf(stdout, "%s -> %s: %d rows, %d bytes in %d tables, in %s (one transaction: committed)\n",
		from, res.Target, rows, bytes, len(res.Tables), res.Took.Round(time.Millisecond))
	fmt.Fprintf(stdout, "next: start mergegate on PostgreSQL: mergegate serve --db <the --to connection string> (or MERGEGATE_DB); keep %s, stopped, as the way back until you are satisfied\n", from)
	if _, err := os.Stat(app.CredentialsPath(from)); err == nil {
		fmt.Fprintf(stdout, "note: the App's credentials file %s is not in the database and was not copied: on PostgreSQL give its app_id, private key and webhook secret as --app-id, --private-key (a PEM file) and --webhook-secret (GITHUB_APP_ID, GITHUB_PRIVATE_KEY_PATH, GITHUB_WEBHOOK_SECRET)\n", app.CredentialsPath(from))
	}
	return nil
}

// migrateStore copies every table of mergegate's SQLite database src into
// the PostgreSQL database dsn, which it migrates first and which must hold
// no rows, in one PostgreSQL transaction.
func migrateStore(ctx context.Context, src, dsn string) (migrateStoreResult, error) {
	return migrateStoreShowing(ctx, src, dsn, io.Discard)
}

// migrateStoreShowing is migrateStore, showing its progress in rows on
// progressTo (a bar on a terminal, a line every 5 s otherwise).
func migrateStoreShowing(ctx context.Context, src, dsn string, progressTo io.Writer) (migrateStoreResult, error) {
	start := time.Now()
	var res migrateStoreResult
	sdb, err := openSQLiteSource(ctx, src)
	if err != nil {
		return res, err
	}
	defer sdb.Close()
	// One read transaction: a consistent snapshot of the file.
	stx, err := sdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return res, fmt.Errorf("read %s: %w", src, err)
	}
	defer stx.Rollback() //nolint:errcheck // read only
	tables, err := sqliteTables(ctx, stx)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", src, err)
	}

	// The target's schema, made (or checked) by the store itself.
	tdb, err := leasedo.Open(ctx, dsn, leasedo.Options{})
	if err != nil {
		return res, err
	}
	res.Target = tdb.Describe()
	tdb.Close()

	pg, err := sql.Open("pgx", dsn)
	if err != nil {
		return res, fmt.Errorf("open %s: %w", res.Target, err)
	}
	defer pg.Close()
	tx, err := pg.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("%s: begin: %w", res.Target, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	pgCols := map[string][]pgColumn{}
	for _, t := range tables {
		cols, err := postgresColumns(ctx, tx, t.name)
		if err != nil {
			return res, fmt.Errorf("%s: %w", res.Target, err)
		}
		if err := sameColumns(t, cols); err != nil {
			return res, fmt.Errorf("%s does not match this binary's PostgreSQL schema: %w", res.Target, err)
		}
		pgCols[t.name] = cols
	}
	// No server may write meanwhile, and the check for an empty target
	// holds until the commit.
	if _, err := tx.ExecContext(ctx, `SET LOCAL lock_timeout = '10s'`); err != nil {
		return res, fmt.Errorf("%s: %w", res.Target, err)
	}
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = pgIdent(t.name)
	}
	if _, err := tx.ExecContext(ctx, `LOCK TABLE `+strings.Join(names, ", ")+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		return res, fmt.Errorf("%s: lock the tables (is a mergegate running on it?): %w", res.Target, err)
	}
	var full []string
	for _, t := range tables {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+pgIdent(t.name)).Scan(&n); err != nil {
			return res, fmt.Errorf("%s: %w", res.Target, err)
		}
		if n > 0 {
			full = append(full, fmt.Sprintf("%s (%d rows)", t.name, n))
		}
	}
	var fenceCalled bool
	var fenceNow int64
	if err := tx.QueryRowContext(ctx, `SELECT last_value, is_called FROM lease_fence`).Scan(&fenceNow, &fenceCalled); err != nil {
		return res, fmt.Errorf("%s: lease fence: %w", res.Target, err)
	}
	if fenceCalled {
		full = append(full, fmt.Sprintf("the lease fence (at %d)", fenceNow))
	}
	if len(full) > 0 {
		return res, fmt.Errorf("%s already holds data: %s; migrate-store copies into an empty database only (nothing was changed): create a new one (CREATE DATABASE mergegate_new OWNER mergegate) or name an empty schema with search_path=... in the URL, and run it again", res.Target, strings.Join(full, ", "))
	}

	seqs, err := sqliteSequences(ctx, stx)
	if err != nil {
		return res, fmt.Errorf("read %s: %w", src, err)
	}
	var total int64
	for _, t := range tables {
		var n int64
		if err := stx.QueryRowContext(ctx, `SELECT count(*) FROM "`+t.name+`"`).Scan(&n); err != nil {
			return res, fmt.Errorf("read %s: %w", src, err)
		}
		total += n
	}
	meter := progress.New(progressTo, "migrate-store", total, progress.Rows, progress.Options{})
	for _, t := range tables {
		c, err := copyTable(ctx, stx, tx, t, pgCols[t.name], meter)
		if err != nil {
			return res, fmt.Errorf("copy %s: %w", t.name, err)
		}
		res.Tables = append(res.Tables, c)
		if err := advanceIdentities(ctx, tx, t.name, pgCols[t.name], seqs[t.name]); err != nil {
			return res, fmt.Errorf("copy %s: %w", t.name, err)
		}
	}
	if err := stx.QueryRowContext(ctx, `SELECT n FROM lease_fence WHERE id = 1`).Scan(&res.Fence); err != nil {
		return res, fmt.Errorf("read %s: lease fence: %w", src, err)
	}
	if res.Fence > 0 {
		if _, err := tx.ExecContext(ctx, `SELECT setval('lease_fence', $1)`, res.Fence); err != nil {
			return res, fmt.Errorf("set the lease fence: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return res, fmt.Errorf("%s: commit: %w", res.Target, err)
	}
	meter.Done()
	res.Took = time.Since(start)
	return res, nil
}

// openSQLiteSource opens src read-only and checks that it is a mergegate
// database at the schema version this binary writes.
func openSQLiteSource(ctx context.Context, src string) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	q.Add("mode", "ro")
	db, err := sql.Open("sqlite", "file:"+src+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", src, err)
	}
	ver, err := migrations.Version(ctx, db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%s is not a mergegate database (a SQLite file mergegate wrote): %w", src, err)
	}
	latest := migrations.Latest()
	switch {
	case ver == 0:
		db.Close()
		return nil, fmt.Errorf("%s is not a mergegate database: it has no schema_version table", src)
	case ver < latest:
		db.Close()
		return nil, fmt.Errorf("%s has schema version %d, older than this binary's %d: run `mergegate migrate --db %s` with this binary first (mergegate stopped), then migrate-store", src, ver, latest, src)
	case ver > latest:
		db.Close()
		return nil, fmt.Errorf("%s has schema version %d, newer than this binary knows (%d): run migrate-store of the mergegate that wrote it", src, ver, latest)
	}
	return db, nil
}

type sqliteTable struct {
	name string
	cols []string
	pk   []string // its primary key's columns, in order; none: by rowid
}

// sqliteTables lists the tables of the SQLite schema to copy, in name
// order: every table but SQLite's own and migrateStoreSkip.
func sqliteTables(ctx context.Context, tx *sql.Tx) ([]sqliteTable, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		if !migrateStoreSkip[n] {
			names = append(names, n)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []sqliteTable
	for _, n := range names {
		t := sqliteTable{name: n}
		rows, err := tx.QueryContext(ctx, `SELECT name, pk FROM pragma_table_info(?) ORDER BY cid`, n)
		if err != nil {
			return nil, err
		}
		pks := map[int]string{}
		for rows.Next() {
			var c string
			var pk int
			if err := rows.Scan(&c, &pk); err != nil {
				rows.Close()
				return nil, err
			}
			t.cols = append(t.cols, c)
			if pk > 0 {
				pks[pk] = c
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for i := 1; i <= len(pks); i++ {
			t.pk = append(t.pk, pks[i])
		}
		out = append(out, t)
	}
	return out, nil
}

// sqliteSequences is AUTOINCREMENT's record of each table's highest id
// ever given (rows since deleted included).
func sqliteSequences(ctx context.Context, tx *sql.Tx) (map[string]int64, error) {
	out := map[string]int64{}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'sqlite_sequence'`).Scan(&n); err != nil || n == 0 {
		return out, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT name, seq FROM sqlite_sequence`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, err
		}
		out[name] = seq
	}
	return out, rows.Err()
}

type pgColumn struct {
	name, dataType string
	serial         string // the sequence of an identity column, else ""
}

func postgresColumns(ctx context.Context, tx *sql.Tx, table string) ([]pgColumn, error) {
	rows, err := tx.QueryContext(ctx, `SELECT column_name, data_type, coalesce(pg_get_serial_sequence(quote_ident($1), column_name), '')
		FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []pgColumn
	for rows.Next() {
		var c pgColumn
		if err := rows.Scan(&c.name, &c.dataType, &c.serial); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// sameColumns: a table the SQLite schema has, the PostgreSQL one has too,
// with the same columns; else a column, or a whole table, would be left
// behind without a word.
func sameColumns(t sqliteTable, pg []pgColumn) error {
	if len(pg) == 0 {
		return fmt.Errorf("it has no table %s", t.name)
	}
	have := map[string]bool{}
	for _, c := range pg {
		have[c.name] = true
	}
	want := map[string]bool{}
	var missing, extra []string
	for _, c := range t.cols {
		want[c] = true
		if !have[c] {
			missing = append(missing, c)
		}
	}
	for _, c := range pg {
		if !want[c.name] {
			extra = append(extra, c.name)
		}
	}
	if len(missing)+len(extra) > 0 {
		return fmt.Errorf("table %s: columns only in SQLite %v, only in PostgreSQL %v", t.name, missing, extra)
	}
	return nil
}

// copyTable copies t's rows in batches of multi-row INSERTs, ids
// included, in the order of its primary key (the inbox's arrival order,
// deliveries.seq, is its key), and counts them.
func copyTable(ctx context.Context, src, dst *sql.Tx, t sqliteTable, pgCols []pgColumn, meter *progress.Meter) (tableCopy, error) {
	c := tableCopy{Name: t.name}
	types := map[string]string{}
	for _, pc := range pgCols {
		types[pc.name] = pc.dataType
	}
	quoted := make([]string, len(t.cols))
	for i, col := range t.cols {
		quoted[i] = `"` + col + `"`
	}
	order := "rowid"
	if len(t.pk) > 0 {
		order = `"` + strings.Join(t.pk, `", "`) + `"`
	}
	rows, err := src.QueryContext(ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM "`+t.name+`" ORDER BY `+order)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	head := `INSERT INTO ` + pgIdent(t.name) + ` (` + strings.Join(quoted, ", ") + `) VALUES `
	var batch []any
	n := 0
	var held int64 // bytes in batch
	flush := func() error {
		if n == 0 {
			return nil
		}
		var b strings.Builder
		b.WriteString(head)
		k := 0
		for r := 0; r < n; r++ {
			if r > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for i := range t.cols {
				if i > 0 {
					b.WriteString(", ")
				}
				k++
				b.WriteString("$" + strconv.Itoa(k))
			}
			b.WriteByte(')')
		}
		if _, err := dst.ExecContext(ctx, b.String(), batch...); err != nil {
			return err
		}
		meter.Add(int64(n))
		clear(batch)
		batch, n, held = batch[:0], 0, 0
		return nil
	}
	vals := make([]any, len(t.cols))
	ptrs := make([]any, len(t.cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return c, err
		}
		for i, col := range t.cols {
			v, size := pgValue(vals[i], types[col])
			batch = append(batch, v)
			c.Bytes += size
			held += size
		}
		c.Rows++
		if n++; n == migrateStoreBatch || held >= migrateStoreBatchBytes {
			if err := flush(); err != nil {
				return c, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return c, err
	}
	return c, flush()
}

// pgValue is a SQLite value as the PostgreSQL column's type takes it, and
// its size in bytes.
func pgValue(v any, dataType string) (any, int64) {
	switch x := v.(type) {
	case nil:
		return nil, 0
	case string:
		if dataType == "bytea" {
			return []byte(x), int64(len(x))
		}
		return x, int64(len(x))
	case []byte:
		if dataType == "bytea" {
			return append([]byte(nil), x...), int64(len(x))
		}
		return string(x), int64(len(x))
	case int64, float64, bool:
		return x, 8
	case time.Time:
		return x, 8
	}
	return v, 8
}

// advanceIdentities sets the sequence of each identity column of table
// past every id copied and every id SQLite ever gave (AUTOINCREMENT's
// record), so that the next row PostgreSQL numbers is new.
func advanceIdentities(ctx context.Context, tx *sql.Tx, table string, cols []pgColumn, given int64) error {
	for _, c := range cols {
		if c.serial == "" {
			continue
		}
		var max sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT max(`+pgIdent(c.name)+`) FROM `+pgIdent(table)).Scan(&max); err != nil {
			return err
		}
		next := given
		if max.Int64 > next {
			next = max.Int64
		}
		if next <= 0 {
			continue
		}
		if _, err := tx.ExecContext(ctx, `SELECT setval($1, $2)`, c.serial, next); err != nil {
			return fmt.Errorf("sequence of %s.%s: %w", table, c.name, err)
		}
	}
	return nil
}

func pgIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// tableNames is the names of ts, sorted.
func tableNames(ts []tableCopy) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	sort.Strings(out)
	return out
}
