package leasedo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`WHERE a = ? AND b = ?`, `WHERE a = $1 AND b = $2`},
		{`WHERE t = ?1 UNION SELECT x FROM y WHERE t = ?1 AND r != ''`, `WHERE t = $1 UNION SELECT x FROM y WHERE t = $1 AND r != ''`},
		{`SELECT '?', "a?b", ? FROM t`, `SELECT '?', "a?b", $1 FROM t`},
		{`coalesce(b.body, x''), coalesce(?, x'')`, `coalesce(b.body, ''::bytea), coalesce($1, ''::bytea)`},
		{`SELECT max'' FROM t WHERE s = 'it''s' AND v = ?`, `SELECT max'' FROM t WHERE s = 'it''s' AND v = $1`},
	} {
		if got := rebind(c.in); got != c.want {
			t.Errorf("rebind(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPgArgs(t *testing.T) {
	in := []any{"a", true, int64(3), false}
	out := pgArgs(in)
	if fmt.Sprint(out) != "[a 1 3 0]" || in[1] != true {
		t.Fatalf("pgArgs(%v) = %v (input now %v), want [a 1 3 0] and the input kept", in, out, in)
	}
	plain := []any{"a", 1}
	if got := pgArgs(plain); &got[0] != &plain[0] {
		t.Fatal("pgArgs copied arguments without a bool")
	}
}

// Which PostgreSQL errors are the database's fault (retried without
// counting an attempt) and which say it cannot be written (/healthz).
func TestPostgresFaults(t *testing.T) {
	for _, c := range []struct {
		err            error
		fault, storage bool
	}{
		{&pgconn.PgError{Code: "53100"}, true, true},   // disk full
		{&pgconn.PgError{Code: "08006"}, true, true},   // connection failure
		{&pgconn.PgError{Code: "57P01"}, true, true},   // admin shutdown
		{&pgconn.PgError{Code: "25006"}, true, true},   // read-only transaction: a standby
		{&pgconn.PgError{Code: "40001"}, true, false},  // serialization failure: retried
		{&pgconn.PgError{Code: "40P01"}, true, false},  // deadlock: retried
		{&pgconn.PgError{Code: "57014"}, true, false},  // statement cancelled
		{&pgconn.PgError{Code: "23505"}, false, false}, // unique violation: the statement's
		{&pgconn.PgError{Code: "42601"}, false, false}, // syntax error
		{errors.New("bad delivery"), false, false},
		{context.Canceled, false, false},
	} {
		if got := isPostgresFault(c.err); got != c.fault {
			t.Errorf("isPostgresFault(%v) = %v, want %v", c.err, got, c.fault)
		}
		if got := IsStorageError(c.err); got != c.storage {
			t.Errorf("IsStorageError(%v) = %v, want %v", c.err, got, c.storage)
		}
	}
}

func TestIsPostgresURL(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://u@h/db": true,
		"postgresql://h1,h2/db?target_session_attrs=read-write": true,
		"host=db dbname=mergegate":                              true,
		" dbname=mergegate":                                     true,
		"mergegate.db":                                          false,
		"/var/lib/mergegate/mergegate.db":                       false,
		"./a=b.db":                                              false,
	} {
		if got := IsPostgresURL(in); got != want {
			t.Errorf("IsPostgresURL(%q) = %v, want %v", in, got, want)
		}
	}
}
