package leasedo

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/mergegate/mergegate/migrations"
)

// The store's SQL is written once, in SQLite's spelling, and the few
// differences of PostgreSQL's are made here, in the DB layer:
//
//   - placeholders: `?` and `?N` become `$n` (rebind), once per statement
//     text (cached);
//   - the empty blob literal x'' becomes ''::bytea;
//   - a Go bool argument becomes 0 or 1: flags are integers on both
//     (SQLite has no other kind), so a flag is written and compared alike;
//   - what has no common spelling (a generated id read back, a list
//     parameter) is chosen by the statement's caller from DB.Postgres.
//
// The SQLite path does none of this: its statements run as written.

// IsPostgresURL reports whether dsn names a PostgreSQL database rather
// than a SQLite file: a postgres:// or postgresql:// URL, or a libpq
// key=value string ("host=... dbname=...").
func IsPostgresURL(dsn string) bool {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return true
	}
	return libpqKeyValue.MatchString(dsn)
}

var libpqKeyValue = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|sslmode|service|target_session_attrs|connect_timeout|application_name)\s*=`)

// openPostgres opens the PostgreSQL database dsn with a pgx pool and
// applies the postgres/ migrations (under an advisory lock).
func openPostgres(ctx context.Context, dsn string, opt Options) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", redactDSN(err, dsn))
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8 // the writer, the readers of the dashboard and engine, migrations' session
	}
	configureFaults(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", redactDSN(err, dsn))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open database %s: %w", describeDSN(cfg), err)
	}
	sdb := stdlib.OpenDBFromPool(pool)
	db := &DB{pg: true, pool: pool, path: describeDSN(cfg), w: &conn{DB: sdb, pg: true}, r: &conn{DB: sdb, pg: true}, pageSize: 8192}
	if err := db.startDBClock(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: read its clock: %w", db.path, err)
	}
	if opt.ReadOnly {
		return db, nil
	}
	if _, _, err := migrations.ApplyPostgres(ctx, sdb); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate %s: %w", db.path, err)
	}
	var schema string
	if err := sdb.QueryRowContext(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open database %s: %w", db.path, err)
	}
	db.channel = channelFor(schema)
	lctx, cancel := context.WithCancel(context.Background())
	db.stopListen, db.listenDone = cancel, make(chan struct{})
	go db.listen(lctx, cfg.ConnConfig.Copy())
	return db, nil
}

// describeDSN names a PostgreSQL database for messages, without its
// password.
func describeDSN(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s/%s", c.User, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.Database)
}

// redactDSN keeps a connection string's password out of an error.
func redactDSN(err error, dsn string) error {
	if err == nil {
		return nil
	}
	return errors.New(strings.ReplaceAll(err.Error(), dsn, "(connection string)"))
}

// Postgres reports whether db is a PostgreSQL database.
func (db *DB) Postgres() bool { return db.pg }

// conn is a pool of connections (*sql.DB) that rebinds the SQLite
// spelling of each statement for PostgreSQL.
type conn struct {
	*sql.DB
	pg bool
}

func (c *conn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if c.pg {
		q, args = pgStatement(q, args)
	}
	return c.DB.ExecContext(ctx, q, args...)
}

func (c *conn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if c.pg {
		q, args = pgStatement(q, args)
	}
	return c.DB.QueryContext(ctx, q, args...)
}

func (c *conn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if c.pg {
		q, args = pgStatement(q, args)
	}
	return c.DB.QueryRowContext(ctx, q, args...)
}

func (c *conn) Exec(q string, args ...any) (sql.Result, error) {
	return c.ExecContext(context.Background(), q, args...)
}

func (c *conn) Query(q string, args ...any) (*sql.Rows, error) {
	return c.QueryContext(context.Background(), q, args...)
}

func (c *conn) QueryRow(q string, args ...any) *sql.Row {
	return c.QueryRowContext(context.Background(), q, args...)
}

// pgStatement is q and args as PostgreSQL takes them.
func pgStatement(q string, args []any) (string, []any) {
	return rebind(q), pgArgs(args)
}

// pgArgs turns bool arguments into 0 or 1 (flags are integer columns).
// args is copied only when it holds one.
func pgArgs(args []any) []any {
	for i, a := range args {
		if _, ok := a.(bool); ok {
			out := append([]any(nil), args...)
			for j := i; j < len(out); j++ {
				if b, ok := out[j].(bool); ok {
					out[j] = boolInt(b)
				}
			}
			return out
		}
	}
	return args
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// rebound caches rebind's answers: the statements are a fixed set.
var rebound sync.Map // string → string

// rebind turns SQLite's placeholders (? and ?N) into PostgreSQL's ($n) and
// the empty blob x” into ”::bytea, outside quoted strings and
// identifiers.
func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(q[i+1:], c)
			if j < 0 {
				b.WriteString(q[i:])
				i = len(q)
				continue
			}
			b.WriteString(q[i : i+j+2])
			i += j + 1
		case c == '?':
			j := i + 1
			for j < len(q) && q[j] >= '0' && q[j] <= '9' {
				j++
			}
			b.WriteByte('$')
			if j > i+1 {
				b.WriteString(q[i+1 : j])
			} else {
				n++
				b.WriteString(strconv.Itoa(n))
			}
			i = j - 1
		case (c == 'x' || c == 'X') && strings.HasPrefix(q[i+1:], "''") && (i == 0 || !isIdentByte(q[i-1])):
			b.WriteString("''::bytea")
			i += 2
		default:
			b.WriteByte(c)
		}
	}
	out := b.String()
	rebound.Store(q, out)
	return out
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// isPostgresStorageError reports whether err says the PostgreSQL database
// cannot be written now: the server unreachable or the connection lost,
// out of space or memory, shutting down, I/O, a read-only standby. A
// conflict to retry or a cancelled statement says nothing about that.
func isPostgresStorageError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code != "57014" && pe.Code[:2] != "40" && isPostgresFault(err)
	}
	return isPostgresFault(err)
}

// isPostgresFault reports whether err is PostgreSQL, or the way to it,
// failing rather than the statement: a lost or refused connection, the
// server out of space or memory, shutting down, a read-only standby, a
// conflict to retry (serialization, deadlock).
func isPostgresFault(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code[:2] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock
			"53", // insufficient resources: disk full, out of memory, too many connections
			"57", // operator intervention: shutdown, cancel
			"58", // system error: I/O
			"XX": // internal error, data corrupted
			return true
		}
		return pe.Code == "25006" // read_only_sql_transaction: a standby
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn)
}
