package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

// future is the set of this binary plus one more step, as the next
// release would have it: compatible (it only adds a table) or not.
func future(t *testing.T, d migrations.Dialect, compatible bool) []migrations.Migration {
	t.Helper()
	all, err := migrations.AllOf(d)
	if err != nil {
		t.Fatal(err)
	}
	next := len(all) + 1
	text := "CREATE TABLE future_things (id INTEGER PRIMARY KEY);\n"
	if compatible {
		text = "-- compatible: only adds a table an older binary never reads\n" + text
	}
	m, err := migrations.Parse(fmt.Sprintf("%04d_future_things.sql", next), text)
	if err != nil {
		t.Fatal(err)
	}
	if m.Compatible != compatible {
		t.Fatalf("Parse: Compatible = %v, want %v", m.Compatible, compatible)
	}
	return append(all, m)
}

// withBinary sets the binary's version recorded with the steps applied
// while fn runs.
func withBinary(v string, fn func()) {
	old := migrations.Binary
	migrations.Binary = v
	defer func() { migrations.Binary = old }()
	fn()
}

// A rolling upgrade: the next release applied one more step, marked
// compatible; this binary (one step behind) still opens the database,
// runs on it and lists the newer version for its warning. Had the step
// not been marked, it refuses to start, saying which binary is needed.
func TestOlderBinaryOnNewerSchema(t *testing.T) {
	for _, compatible := range []bool{true, false} {
		t.Run(fmt.Sprintf("compatible=%v", compatible), func(t *testing.T) {
			for _, backend := range []string{"sqlite", "postgres"} {
				t.Run(backend, func(t *testing.T) {
					olderBinaryOnNewerSchema(t, backend, compatible)
				})
			}
		})
	}
}

func olderBinaryOnNewerSchema(t *testing.T, backend string, compatible bool) {
	ctx := context.Background()
	d, path := migrations.SQLite, filepath.Join(t.TempDir(), "m.db")
	var db *sql.DB
	apply := migrations.ApplySet
	if backend == "postgres" {
		d, path = migrations.Postgres, pgtest.URL(t)
		var err error
		if db, err = sql.Open("pgx", path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		apply = migrations.ApplyPostgresSet
	} else {
		db = rawDB(t, path)
	}
	latest := migrations.LatestOf(d)
	set := future(t, d, compatible)
	withBinary("v9.9.9", func() {
		if _, to, err := apply(ctx, db, set); err != nil || to != latest+1 {
			t.Fatalf("the newer binary's migrations: to %d %v, want %d", to, err, latest+1)
		}
	})
	newer, err := migrations.Newer(ctx, d, db, latest)
	if err != nil || len(newer) != 1 || newer[0].Version != latest+1 || newer[0].Compatible != compatible || newer[0].Binary != "v9.9.9" {
		t.Fatalf("Newer = %+v %v, want version %d, compatible %v, applied by v9.9.9", newer, err, latest+1, compatible)
	}
	all, _ := migrations.AllOf(d)
	from, to, err := apply(ctx, db, all)
	if compatible {
		if err != nil || from != latest+1 || to != latest+1 {
			t.Fatalf("the older binary on a compatible newer schema: %d→%d %v, want %d→%d and no error", from, to, err, latest+1, latest+1)
		}
		// The store opens and works on it.
		ldb, err := leasedo.Open(ctx, path, leasedo.Options{})
		if err != nil {
			t.Fatalf("leasedo.Open on a compatible newer schema: %v", err)
		}
		defer ldb.Close()
		got, err := ldb.NewerSchema(ctx)
		if err != nil || len(got) != 1 || got[0].Version != latest+1 {
			t.Fatalf("NewerSchema = %+v %v, want version %d", got, err, latest+1)
		}
		s := leasedo.NewStore(ldb, leasedo.Config{})
		if err := s.Track(ctx, leasedo.Key{Tenant: "42", Repo: "octo/hello"}); err != nil {
			t.Fatalf("writing on a compatible newer schema: %v", err)
		}
		return
	}
	var tn *migrations.TooNewError
	if !errors.As(err, &tn) || tn.DB != latest+1 || len(tn.Incompatible) != 1 {
		t.Fatalf("the older binary on an incompatible newer schema: %d→%d %v, want *TooNewError naming the step", from, to, err)
	}
	want := fmt.Sprintf("database schema version %d is newer than this binary knows (%d), and %04d_future_things.sql (version %d) is not compatible with older binaries: run mergegate v9.9.9 (which applied it) or newer, or restore a backup taken before the upgrade",
		latest+1, latest, latest+1, latest+1)
	if err.Error() != want {
		t.Fatalf("refusal:\n%s\nwant:\n%s", err, want)
	}
	if _, err := leasedo.Open(ctx, path, leasedo.Options{}); !errors.As(err, &tn) || !strings.Contains(err.Error(), "run mergegate v9.9.9") {
		t.Fatalf("leasedo.Open on an incompatible newer schema: %v, want the refusal", err)
	}
}

// A database from before compatible migrations (schema_version without
// the columns) gets them; its versions count as not compatible, and a
// binary unknown.
func TestVersionTableGainsColumns(t *testing.T) {
	ctx := context.Background()
	db := rawDB(t, filepath.Join(t.TempDir(), "old.db"))
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(all[0].SQL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO schema_version VALUES (1, '0001_init.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	if _, to, err := migrations.Apply(ctx, db); err != nil || to != migrations.Latest() {
		t.Fatalf("Apply = %d %v", to, err)
	}
	rows, err := db.Query(`SELECT version, name, compatible, applied_by FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v, compat int
		var name, by string
		if err := rows.Scan(&v, &name, &compat, &by); err != nil {
			t.Fatal(err)
		}
		wantCompat := 0
		if all[v-1].Compatible {
			wantCompat = 1
		}
		wantBy := migrations.Binary
		if v == 1 {
			wantCompat, wantBy = 0, ""
		}
		if compat != wantCompat || by != wantBy {
			t.Errorf("version %d (%s): compatible %d, applied by %q; want %d, %q", v, name, compat, by, wantCompat, wantBy)
		}
	}
}

// The marker's spelling: the first line only, with a reason.
func TestParseCompatible(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool
		want bool
	}{
		{"-- compatible: adds a table\nCREATE TABLE x (a INT);", true, true},
		{"  --   compatible:   adds a column  \nALTER TABLE x ADD b INT;", true, false}, // "--   compatible" is not the marker
		{"CREATE TABLE x (a INT);\n-- compatible: too late\n", true, false},
		{"-- compatible:\nCREATE TABLE x (a INT);", false, false},
	} {
		m, err := migrations.Parse("0042_x.sql", c.text)
		if (err == nil) != c.ok || (err == nil && m.Compatible != c.want) {
			t.Errorf("Parse(%q) = compatible %v, %v; want ok %v, compatible %v", c.text, m.Compatible, err, c.ok, c.want)
		}
	}
	// The embedded migrations this change adds are compatible ones.
	for _, d := range []migrations.Dialect{migrations.SQLite, migrations.Postgres} {
		all, _ := migrations.AllOf(d)
		if last := all[len(all)-1]; !last.Compatible || !strings.HasSuffix(last.Name, "_outbox_comment.sql") {
			t.Errorf("dialect %d: %s is not marked compatible", d, last.Name)
		}
	}
}
