package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
	_ "modernc.org/sqlite"
)

// rawDB opens path as the single writer Apply expects (IMMEDIATE
// transactions), without leasedo.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestAllInOrder(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no migrations embedded")
	}
	for i, m := range all {
		if m.Version != i+1 || !strings.HasPrefix(m.Name, fmt.Sprintf("%04d_", m.Version)) || !strings.HasSuffix(m.Name, ".sql") || strings.TrimSpace(m.SQL) == "" {
			t.Errorf("migration %d: %d %q (%d bytes of SQL)", i, m.Version, m.Name, len(m.SQL))
		}
	}
	if migrations.Latest() != all[len(all)-1].Version {
		t.Fatalf("Latest() = %d, want %d", migrations.Latest(), all[len(all)-1].Version)
	}
}

func TestApplyRecordsEachVersionOnce(t *testing.T) {
	ctx := context.Background()
	db := rawDB(t, filepath.Join(t.TempDir(), "m.db"))
	if v, err := migrations.Version(ctx, db); v != 0 || err != nil {
		t.Fatalf("version of a new database = %d %v, want 0", v, err)
	}
	from, to, err := migrations.Apply(ctx, db)
	if err != nil || from != 0 || to != migrations.Latest() {
		t.Fatalf("Apply = %d→%d %v, want 0→%d", from, to, err, migrations.Latest())
	}
	all, _ := migrations.All()
	rows, err := db.QueryContext(ctx, `SELECT version, name, applied_at FROM schema_version ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var v int
		var name string
		var at int64
		if err := rows.Scan(&v, &name, &at); err != nil {
			t.Fatal(err)
		}
		if at <= 0 {
			t.Errorf("version %d: applied_at %d", v, at)
		}
		got = append(got, fmt.Sprintf("%d:%s", v, name))
	}
	rows.Close()
	var want []string
	for _, m := range all {
		want = append(want, fmt.Sprintf("%d:%s", m.Version, m.Name))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("schema_version = %v, want %v", got, want)
	}
	for _, table := range []string{"leases", "queue", "events", "audit", "deliveries", "delivery_bodies", "repos", "installations"} {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s missing after Apply (%v)", table, err)
		}
	}

	// Idempotent: a second Apply changes nothing.
	from, to, err = migrations.Apply(ctx, db)
	if err != nil || from != migrations.Latest() || to != migrations.Latest() {
		t.Fatalf("second Apply = %d→%d %v", from, to, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM schema_version`).Scan(&n); err != nil || n != len(all) {
		t.Fatalf("schema_version rows after a second Apply = %d %v", n, err)
	}
}

// Re-opening through leasedo keeps the data and the version.
func TestReopenIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	k := leasedo.Key{Tenant: "42", Repo: "octo/hello"}
	for i := 0; i < 3; i++ {
		db, err := leasedo.Open(ctx, path, leasedo.Options{})
		if err != nil {
			t.Fatalf("open #%d: %v", i+1, err)
		}
		if v, err := db.SchemaVersion(ctx); v != migrations.Latest() || err != nil {
			t.Fatalf("open #%d: version %d %v", i+1, v, err)
		}
		s := leasedo.NewStore(db, leasedo.Config{})
		if err := s.Track(ctx, k); err != nil {
			t.Fatal(err)
		}
		tr, err := s.Tracked(ctx)
		if err != nil || len(tr) != 1 {
			t.Fatalf("open #%d: tracked %v %v", i+1, tr, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A database written by a newer mergegate is refused, by Apply and by
// leasedo.Open, with *TooNewError saying so, and is left as it was.
func TestTooNewRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "m.db")
	db := rawDB(t, path)
	if _, _, err := migrations.Apply(ctx, db); err != nil {
		t.Fatal(err)
	}
	newer := migrations.Latest() + 1
	if _, err := db.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'from_the_future.sql', 1)`, newer); err != nil {
		t.Fatal(err)
	}

	from, to, err := migrations.Apply(ctx, db)
	var tn *migrations.TooNewError
	if !errors.As(err, &tn) || tn.DB != newer || tn.Binary != migrations.Latest() || from != newer || to != newer {
		t.Fatalf("Apply on a newer database = %d→%d %v, want *TooNewError{%d, %d}", from, to, err, newer, migrations.Latest())
	}
	for _, want := range []string{fmt.Sprintf("version %d", newer), "newer than this binary", fmt.Sprintf("(%d)", migrations.Latest())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	db.Close()

	_, err = leasedo.Open(ctx, path, leasedo.Options{})
	if !errors.As(err, &tn) || tn.DB != newer {
		t.Fatalf("leasedo.Open on a newer database: %v, want *TooNewError", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "newer than this binary") {
		t.Errorf("leasedo.Open message %q should name the file and say it is newer", err)
	}
	// Refused, not modified.
	check := rawDB(t, path)
	if v, err := migrations.Version(ctx, check); v != newer || err != nil {
		t.Fatalf("version after refusal = %d %v, want %d", v, err, newer)
	}
}

func TestOpenNotSQLite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "notes.txt")
	text := strings.Repeat("this is not a database, just some notes\n", 200)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := leasedo.Open(ctx, path, leasedo.Options{})
	if err == nil {
		t.Fatal("Open of a text file: want an error")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a database") {
		t.Fatalf("Open of a text file: %q should name the file and say it is not a database", err)
	}
	// And the file is left alone.
	if b, _ := os.ReadFile(path); string(b) != text {
		t.Fatal("Open modified a file that is not a database")
	}
	for _, bad := range []string{"", filepath.Join(dir, "no", "such", "dir", "m.db"), dir} {
		if _, err := leasedo.Open(ctx, bad, leasedo.Options{}); err == nil {
			t.Errorf("Open(%q): want an error", bad)
		}
	}
	if _, err := leasedo.Open(ctx, filepath.Join(dir, "m.db"), leasedo.Options{Sync: "sometimes"}); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Errorf("Open with a bad sync mode: %v", err)
	}
}

// Connections racing to migrate one new file, as separate processes would
// (each its own *sql.DB): every Apply succeeds, each version recorded once.
// (leasedo's TestTwoProcessesMigrate does it with real processes.)
func TestConcurrentApply(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		path := filepath.Join(t.TempDir(), "m.db")
		// Created and in WAL mode first: this test is about Apply, not the
		// switch to WAL (see leasedo's TestTwoProcessesMigrate).
		if _, err := rawDB(t, path).ExecContext(ctx, `SELECT 1`); err != nil {
			t.Fatal(err)
		}
		var dbs []*sql.DB
		for i := 0; i < 6; i++ {
			dbs = append(dbs, rawDB(t, path))
		}
		var wg sync.WaitGroup
		errs := make([]error, len(dbs))
		start := make(chan struct{})
		for i, db := range dbs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, to, err := migrations.Apply(ctx, db)
				if err == nil && to != migrations.Latest() {
					err = fmt.Errorf("reached version %d", to)
				}
				errs[i] = err
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: connection %d: %v", round, i, err)
			}
		}
		var n int
		if err := dbs[0].QueryRowContext(ctx, `SELECT count(*) FROM schema_version`).Scan(&n); err != nil || n != migrations.Latest() {
			t.Fatalf("round %d: %d schema_version rows %v", round, n, err)
		}
	}
}

// A version-1 database with deliveries in it is upgraded by 0002 and 0003:
// the bodies move to delivery_bodies, byte for byte, marked raw (an empty
// encoding), and nothing else changes.
func TestUpgradeMovesDeliveryBodies(t *testing.T) {
	ctx := context.Background()
	db := rawDB(t, filepath.Join(t.TempDir(), "v1.db"))
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(all[0].SQL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO schema_version VALUES (1, '0001_init.sql', 0);
		INSERT INTO deliveries (delivery_id, event, action, tenant, repo, body, received_at, state)
		VALUES ('d1', 'pull_request', 'opened', '1', 'o/r', CAST('{"a":1}' AS BLOB), 5, 'pending'),
		       ('d2', 'push', '', '1', 'o/r', x'', 6, 'done')`); err != nil {
		t.Fatal(err)
	}
	from, to, err := migrations.Apply(ctx, db)
	if err != nil || from != 1 || to != migrations.Latest() {
		t.Fatalf("Apply = %d→%d %v", from, to, err)
	}
	var body string
	var n int
	var enc string
	if err := db.QueryRow(`SELECT b.body, b.encoding FROM deliveries d JOIN delivery_bodies b ON b.seq = d.seq WHERE d.delivery_id = 'd1'`).Scan(&body, &enc); err != nil || body != `{"a":1}` || enc != "" {
		t.Fatalf("moved body = %q, encoding %q, %v", body, enc, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM delivery_bodies`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("delivery_bodies rows = %d %v", n, err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM pragma_table_info('deliveries') WHERE name = 'body'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("deliveries still has a body column (%d, %v)", n, err)
	}
}

// 0004 rebuilds the tables without AUTOINCREMENT and the deliveries'
// indexes as partial ones: every row keeps its id and columns, a new row
// still gets an id above every row kept, and the indexes hold only the
// rows of their state.
func TestUpgradeKeepsRowsAndIDs(t *testing.T) {
	ctx := context.Background()
	db := rawDB(t, filepath.Join(t.TempDir(), "v3.db"))
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all[:3] {
		if _, err := db.Exec(m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
	}
	if _, err := db.Exec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL);
		INSERT INTO schema_version VALUES (1, '0001_init.sql', 0), (2, '0002_delivery_bodies.sql', 0), (3, '0003_body_encoding.sql', 0);
		INSERT INTO deliveries (seq, delivery_id, event, action, tenant, repo, received_at, state, attempts, last_error, next_try_at, processed_at)
		VALUES (7, 'd7', 'pull_request', 'opened', '1', 'o/r', 5, 'done', 1, '', 0, 9),
		       (8, 'd8', 'pull_request', 'closed', '1', 'o/r', 6, 'failed', 5, 'bad payload', 0, NULL),
		       (9, 'd9', 'push', '', '1', 'o/r', 7, 'pending', 0, '', 0, NULL);
		INSERT INTO delivery_bodies (seq, body, encoding) VALUES (7, x'01', ''), (8, x'02', ''), (9, x'03', 's2');
		INSERT INTO queue (id, tenant, repo, pr_number, pr_sha, queued_at, status, gate_reason, base_ref, branch_updated_sha, check_run_id, check_title)
		VALUES (4, '1', 'o/r', 12, 'abc', 3, 'waiting', 'checks pending', 'main', 'abc', 77, 'waiting for checks');
		INSERT INTO events (id, tenant, repo, ts, event_type, action, pr_number, details) VALUES (11, '1', 'o/r', 3, 'pull_request', 'opened', 12, '{"sha":"abc"}');
		INSERT INTO audit (id, tenant, repo, ts, action, pr_number, pr_sha, reason) VALUES (13, '1', 'o/r', 3, 'join', 12, 'abc', 'opened')`); err != nil {
		t.Fatal(err)
	}
	from, to, err := migrations.Apply(ctx, db)
	if err != nil || from != 3 || to != migrations.Latest() {
		t.Fatalf("Apply = %d→%d %v", from, to, err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE sql LIKE '%AUTOINCREMENT%'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables still AUTOINCREMENT (%v)", n, err)
	}
	for _, c := range []struct{ query, want string }{
		{`SELECT group_concat(seq || ':' || delivery_id || ':' || state || ':' || attempts || ':' || last_error || ':' || coalesce(processed_at, '-'), ' ') FROM deliveries`,
			"7:d7:done:1::9 8:d8:failed:5:bad payload:- 9:d9:pending:0::-"},
		{`SELECT group_concat(seq || ':' || hex(body) || ':' || encoding, ' ') FROM delivery_bodies`, "7:01: 8:02: 9:03:s2"},
		{`SELECT id || ':' || pr_number || ':' || pr_sha || ':' || gate_reason || ':' || check_run_id || ':' || check_title FROM queue`,
			"4:12:abc:checks pending:77:waiting for checks"},
		// 0011: a queued entry's consent is for the head it holds.
		{`SELECT consent_sha || ':' || consent_note FROM queue`, "abc:"},
		{`SELECT id || ':' || details FROM events`, `11:{"sha":"abc"}`},
		{`SELECT id || ':' || action || ':' || reason FROM audit`, "13:join:opened"},
		// Each index holds its own state's rows only.
		{`SELECT group_concat(seq) FROM deliveries INDEXED BY deliveries_pending WHERE state = 'pending'`, "9"},
		{`SELECT group_concat(seq) FROM deliveries INDEXED BY deliveries_failed WHERE state = 'failed'`, "8"},
		{`SELECT group_concat(seq) FROM deliveries INDEXED BY deliveries_processed WHERE processed_at > 0`, "7"},
	} {
		var got string
		if err := db.QueryRow(c.query).Scan(&got); err != nil || got != c.want {
			t.Errorf("%s\n = %q (%v), want %q", c.query, got, err, c.want)
		}
	}
	// New rows go after every row kept.
	var seq, id int64
	if err := db.QueryRow(`INSERT INTO deliveries (delivery_id, event, action, tenant, repo, received_at) VALUES ('d10', 'push', '', '1', 'o/r', 8) RETURNING seq`).Scan(&seq); err != nil || seq != 10 {
		t.Fatalf("new delivery seq = %d %v, want 10", seq, err)
	}
	if err := db.QueryRow(`INSERT INTO events (tenant, repo, ts, event_type, action, pr_number) VALUES ('1', 'o/r', 4, 'push', '', 0) RETURNING id`).Scan(&id); err != nil || id != 12 {
		t.Fatalf("new event id = %d %v, want 12", id, err)
	}
}

// 0013: a train group an earlier mergegate built has its head on a branch
// of its own (mergegate/<base>/<id>), which is deleted with it; a planned
// one will be built on the train branch.
func TestUpgradeGivesBuiltGroupsTheirOwnBranch(t *testing.T) {
	ctx := context.Background()
	db := rawDB(t, filepath.Join(t.TempDir(), "v12.db"))
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := migrations.ApplySet(ctx, db, all[:12]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO train_groups (id, tenant, repo, base, seq, state, prs, head_sha, created_at)
		VALUES (1, '1', 'o/r', 'main', 1, 'testing', '[]', 'abc', 0), (2, '1', 'o/r', 'main', 2, 'planned', '[]', '', 0)`); err != nil {
		t.Fatal(err)
	}
	if from, to, err := migrations.Apply(ctx, db); err != nil || from != 12 || to != migrations.Latest() {
		t.Fatalf("Apply = %d→%d %v", from, to, err)
	}
	var got string
	if err := db.QueryRow(`SELECT group_concat(id || ':' || own, ' ') FROM train_groups`).Scan(&got); err != nil || got != "1:1 2:0" {
		t.Errorf("groups' own = %q (%v), want the built one's 1 and the planned one's 0", got, err)
	}
}
