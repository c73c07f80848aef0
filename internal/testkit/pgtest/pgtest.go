package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Env is the variable naming the test server (a postgres:// URL or a
// libpq key=value string).
const Env = "MERGEGATE_TEST_POSTGRES"

// Server returns the server's connection string, or ends tb: skipped when
// none is configured, failed when CI=true.
func Server(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(Env)
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("PostgreSQL: CI=true but %s is not set (run the tests under scripts/with-postgres, as .ci/run does)", Env)
		}
		tb.Skipf("PostgreSQL: no server configured; set %s to a postgres:// URL (scripts/with-postgres starts one) to run this test", Env)
	}
	return dsn
}

// URL returns a connection string to a new, empty schema of the server,
// first in the connections' search_path; the schema is dropped when tb
// ends.
func URL(tb testing.TB) string {
	tb.Helper()
	dsn := Server(tb)
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		tb.Fatalf("PostgreSQL %s: %v", Env, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		admin.Close()
		tb.Fatalf("PostgreSQL: create schema: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("PostgreSQL: drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(tb, dsn, schema)
}

// WithSearchPath is dsn with its connections' search_path set to schema.
func WithSearchPath(tb testing.TB, dsn, schema string) string {
	tb.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			tb.Fatalf("PostgreSQL %s: %v", Env, err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}
