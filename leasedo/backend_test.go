package leasedo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
)

// The store's contract runs on both backends: a test wrapped in
// onBackends runs twice, as the subtests "sqlite" (a file in the test's
// temporary folder) and "postgres" (a schema of its own on the server
// MERGEGATE_TEST_POSTGRES names; skipped without one, failed when
// CI=true). The stores it opens (newStore, openTB, openDB) are on the
// subtest's backend.

func onBackends(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	t.Run("sqlite", fn)
	t.Run("postgres", fn)
}

// onPostgres reports whether tb runs under onBackends' "postgres".
func onPostgres(tb testing.TB) bool {
	return strings.Contains(tb.Name()+"/", "/postgres/")
}

// openDB opens a new database on tb's backend, closed when tb ends.
func openDB(tb testing.TB, opt Options) *DB {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "mergegate.db")
	if onPostgres(tb) {
		path = pgtest.URL(tb)
	}
	db, err := Open(context.Background(), path, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// secondReplica is another Store on s's database, with its own
// connections (a second process, as far as the database can tell) and the
// same clock.
func secondReplica(t *testing.T, s *Store, clk Clock) *Store {
	t.Helper()
	path := s.db.path
	if s.db.pg {
		path = pgtest.WithSearchPath(t, pgtest.Server(t), searchPath(t, s.db))
	}
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewStore(db, Config{TTL: s.ttl, Dead: s.dead, Clock: clk})
}

func searchPath(t *testing.T, db *DB) string {
	t.Helper()
	var sp string
	if err := db.r.QueryRowContext(context.Background(), `SELECT current_schema()`).Scan(&sp); err != nil {
		t.Fatal(err)
	}
	return sp
}

var _ = time.Second

// sqliteOnly runs fn as the subtest "sqlite" alone: what it tests is
// SQLite's own (its one writer connection, a page cap), with no
// counterpart on PostgreSQL.
func sqliteOnly(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	t.Run("sqlite", fn)
}
