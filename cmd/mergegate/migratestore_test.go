package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

var (
	msKey   = leasedo.Key{Tenant: "7", Repo: "octo/app"}
	msOther = leasedo.Key{Tenant: "7", Repo: "octo/lib"}
)

func msSha(pr int) string { return fmt.Sprintf("%040d", pr) }

func msEvent(k leasedo.Key, pr int) leasedo.Event {
	return leasedo.Event{EventType: "pull_request", Action: "labeled", Op: leasedo.OpJoin, Tenant: k.Tenant, Repo: k.Repo,
		PRNumber: pr, Details: &leasedo.Details{Sha: msSha(pr)}}
}

// msPrepare reads a delivery's body as the event it carries; a body
// "fail" fails.
func msPrepare(seen *[]int64) leasedo.Prepare {
	return func(d leasedo.Delivery) (leasedo.Batch, error) {
		*seen = append(*seen, d.Seq)
		switch string(d.Body) {
		case "fail":
			return leasedo.Batch{}, errors.New("cannot translate")
		case "resume":
			resume := false
			return leasedo.Batch{Suspend: &resume}, nil
		}
		var ev leasedo.Event
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			return leasedo.Batch{}, err
		}
		ev.Op = leasedo.OpJoin
		return leasedo.Batch{Events: []leasedo.Event{ev}}, nil
	}
}

func msEnqueue(t *testing.T, in *leasedo.Inbox, k leasedo.Key, id string, body []byte) {
	t.Helper()
	if _, err := in.Enqueue(context.Background(), leasedo.Delivery{ID: id, Event: "pull_request", Action: "labeled",
		Tenant: k.Tenant, Repo: k.Repo, Body: body, ReceivedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// msFill makes the SQLite database of a mergegate that ran a while, through
// the real store: deliveries applied, failed and pending, with bodies; queue
// entries in several states; events, audit, a held lease, a train group, a
// freeze, a policy.
func msFill(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	db, err := leasedo.Open(ctx, path, leasedo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := leasedo.NewStore(db, leasedo.Config{})
	if err := s.Track(ctx, msKey, msOther); err != nil {
		t.Fatal(err)
	}
	in := s.NewInbox(16)
	body := func(pr int) []byte { b, _ := json.Marshal(msEvent(msKey, pr)); return b }
	msEnqueue(t, in, msKey, "d-1", body(1))
	msEnqueue(t, in, msKey, "d-bad", []byte("fail"))
	msEnqueue(t, in, msKey, "d-2", body(2))
	msEnqueue(t, in, msKey, "d-resume", []byte("resume"))
	var seen []int64
	if _, err := s.Drain(ctx, msKey, "worker", 10, msPrepare(&seen), leasedo.DrainPolicy{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	// Pending ones, arrival order interleaved across repositories.
	msEnqueue(t, in, msKey, "d-5", body(5))
	msEnqueue(t, in, msOther, "d-other", body(9))
	msEnqueue(t, in, msKey, "d-3", body(3))
	msEnqueue(t, in, msKey, "d-4", body(4))
	in.Close()

	for _, pr := range []int{8, 10} {
		if _, err := s.ProcessEvent(ctx, msEvent(msKey, pr), "worker"); err != nil {
			t.Fatal(err)
		}
	}
	l, err := s.Acquire(ctx, msKey, "worker")
	if err != nil {
		t.Fatal(err)
	}
	// A bounce whose check run is still to end (check_outbox), a command.
	if err := s.SetCheckRun(ctx, l, 8, msSha(8), 555, "1st in line"); err != nil {
		t.Fatal(err)
	}
	if err := s.Bounce(ctx, l, 8, msSha(8), "checks failed", true, leasedo.CheckRunEnd{Conclusion: "failure", Title: "bounced", Summary: "ci failed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCommand(ctx, l, leasedo.Command{PRNumber: 1, CommentID: 77, Author: "alice", Command: "priority", Arg: "high", CreatedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	// A train group that landed (train_landed).
	landed, err := s.PlanGroups(ctx, l, "next", -1, [][]leasedo.GroupPR{{{Number: 10, SHA: msSha(10)}}}, false)
	if err != nil || len(landed) != 1 {
		t.Fatal(landed, err)
	}
	landed[0].Head = "head-10"
	if err := s.LandGroup(ctx, l, landed[0], leasedo.Landed{Tip: "tip-10", Tested: landed[0].Head}, "fast-forward", func(leasedo.GroupPR) leasedo.CheckRunEnd {
		return leasedo.CheckRunEnd{Conclusion: "success", Title: "merged"}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Block(ctx, l, 2, msSha(2), "push restrictions"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(ctx, l, 1, msSha(1), leasedo.StatusEvaluating, "checks pending"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PlanGroups(ctx, l, "main", -1, [][]leasedo.GroupPR{{{Number: 1, SHA: msSha(1)}}}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetFreeze(ctx, msKey, "release", true, "code freeze", "ops"); err != nil {
		t.Fatal(err)
	}
	if err := s.SavePolicy(ctx, leasedo.StoredPolicy{Key: msKey, Source: "repository", File: "octo/app:.github/mergegate.yml",
		SHA: "abc", Content: "mode: train\n", ReadAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	// A lease left held (a later fencing token than the one released).
	if _, err := s.Acquire(ctx, msOther, "worker-2"); err != nil {
		t.Fatal(err)
	}
	// The replicas' records: a singleton job's last run with its state,
	// its lease left held, a cron claim, a heartbeat.
	if ran, err := s.RunJob(ctx, leasedo.JobDiscovery, "r1/cron", time.Minute, func(ctx context.Context, l *leasedo.Lease) error {
		return s.SetJobState(ctx, l, leasedo.JobDiscovery, `{"installations":{"42":false}}`)
	}); !ran || err != nil {
		t.Fatal(ran, err)
	}
	if _, err := s.Acquire(ctx, leasedo.JobKey(leasedo.JobPrune), "r1/worker"); err != nil {
		t.Fatal(err)
	}
	if won, err := s.ClaimReconcile(ctx, msKey, "r1/cron", time.Minute); !won || err != nil {
		t.Fatal(won, err)
	}
	if _, err := s.Heartbeat(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
}

// msState is what the store answers about the test's repositories.
type msState struct {
	Queue           map[leasedo.Key][]leasedo.Entry
	Audit           map[leasedo.Key][]leasedo.AuditEntry
	Events          map[leasedo.Key][]leasedo.LoggedEvent
	Groups          []leasedo.Group
	Freezes         []leasedo.Freeze
	Policy          leasedo.StoredPolicy
	Tracked         []leasedo.Tracked
	Pending, Failed []leasedo.Delivery
	Done            []leasedo.Delivery
	Bodies          map[string]string
	Leases          map[leasedo.Key]string // held by whom
	Commands        []leasedo.Command
	CheckRunsToEnd  []leasedo.CheckRunToEnd
	Landed          leasedo.Landed
	Suspended       bool
	Discovery       leasedo.JobRun
	JobLease        string // the prune's lease, held by whom
	Replicas        int
}

func msRead(t *testing.T, s *leasedo.Store) msState {
	t.Helper()
	ctx := context.Background()
	st := msState{Queue: map[leasedo.Key][]leasedo.Entry{}, Audit: map[leasedo.Key][]leasedo.AuditEntry{},
		Events: map[leasedo.Key][]leasedo.LoggedEvent{}, Bodies: map[string]string{}}
	var err error
	for _, k := range []leasedo.Key{msKey, msOther} {
		if st.Queue[k], err = s.Queue(ctx, k); err != nil {
			t.Fatal(err)
		}
		if st.Audit[k], err = s.Audit(ctx, k); err != nil {
			t.Fatal(err)
		}
		if st.Events[k], err = s.Events(ctx, k); err != nil {
			t.Fatal(err)
		}
		if err := s.KeptDeliveries(ctx, k, time.Time{}, func(d leasedo.Delivery) error {
			st.Bodies[d.ID] = string(d.Body)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if st.Groups, err = s.Groups(ctx, msKey); err != nil {
		t.Fatal(err)
	}
	if st.Freezes, err = s.Freezes(ctx, msKey); err != nil {
		t.Fatal(err)
	}
	if st.Policy, _, err = s.Policy(ctx, msKey); err != nil {
		t.Fatal(err)
	}
	if st.Tracked, err = s.Tracked(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Pending, err = s.Deliveries(ctx, msKey, leasedo.DeliveryPending, 100); err != nil {
		t.Fatal(err)
	}
	if st.Failed, err = s.Deliveries(ctx, msKey, leasedo.DeliveryFailed, 100); err != nil {
		t.Fatal(err)
	}
	if st.Done, err = s.Deliveries(ctx, msKey, leasedo.DeliveryDone, 100); err != nil {
		t.Fatal(err)
	}
	// The same instants, whatever the driver's Location and empty body.
	for _, l := range [][]leasedo.Delivery{st.Pending, st.Failed, st.Done} {
		for i := range l {
			l[i].Body = nil
			l[i].ReceivedAt = time.UnixMilli(l[i].ReceivedAt.UnixMilli())
			l[i].NextTryAt = time.UnixMilli(l[i].NextTryAt.UnixMilli())
		}
	}
	if st.Commands, err = s.Commands(ctx, msKey); err != nil {
		t.Fatal(err)
	}
	if st.CheckRunsToEnd, err = s.CheckRunsToEnd(ctx, msKey); err != nil {
		t.Fatal(err)
	}
	if st.Landed, err = s.LandedOn(ctx, msKey, "next"); err != nil {
		t.Fatal(err)
	}
	if st.Suspended, err = s.Suspended(ctx, msKey.Tenant); err != nil {
		t.Fatal(err)
	}
	if st.Discovery, _, err = s.LastJobRun(ctx, leasedo.JobDiscovery); err != nil {
		t.Fatal(err)
	}
	st.Discovery.RanAt = time.UnixMilli(st.Discovery.RanAt.UnixMilli())
	if ls, err := s.Check(ctx, leasedo.JobKey(leasedo.JobPrune)); err != nil {
		t.Fatal(err)
	} else {
		st.JobLease = ls.HeldBy
	}
	if st.Replicas, err = s.LiveReplicas(ctx); err != nil {
		t.Fatal(err)
	}
	st.Leases = map[leasedo.Key]string{}
	for _, k := range []leasedo.Key{msKey, msOther} {
		ls, err := s.Check(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Locked {
			st.Leases[k] = ls.HeldBy
		}
	}
	return st
}

func msOpen(t *testing.T, path string) *leasedo.Store {
	t.Helper()
	db, err := leasedo.Open(context.Background(), path, leasedo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return leasedo.NewStore(db, leasedo.Config{})
}

// msCompare fails t unless got and want agree, field by field.
func msCompare(t *testing.T, got, want msState) {
	t.Helper()
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
			t.Errorf("%s: PostgreSQL answers\n%+v\nSQLite answered\n%+v", gv.Type().Field(i).Name, g, w)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

func sqlDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	d, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func msMaxSeq(ds ...[]leasedo.Delivery) int64 {
	var m int64
	for _, l := range ds {
		for _, d := range l {
			m = max(m, d.Seq)
		}
	}
	return m
}

// The command copies a SQLite database into a fresh PostgreSQL schema, and
// the store on PostgreSQL answers as it did on SQLite; then it goes on
// from there: pending deliveries drain in arrival order, new rows get new
// ids, a new lease a later fencing token.
func TestMigrateStoreCopiesEverything(t *testing.T) {
	clearEnv(t)
	dsn := pgtest.URL(t)
	src := filepath.Join(t.TempDir(), "mergegate.db")
	msFill(t, src)

	sq := msOpen(t, src)
	want := msRead(t, sq)
	if len(want.Pending) != 3 || len(want.Failed) != 1 || len(want.Done) != 3 ||
		len(want.Commands) != 1 || len(want.CheckRunsToEnd) == 0 || want.Landed.Tip == "" || len(want.Queue[msKey]) < 2 ||
		len(want.Groups) != 1 || len(want.Freezes) != 1 || want.Policy.Content == "" || want.Leases[msOther] != "worker-2" || len(want.Bodies) < 6 ||
		want.Discovery.State == "" || want.JobLease != "r1/worker" || want.Replicas != 1 || len(want.Tracked) != 2 {
		t.Fatalf("the SQLite database is not filled as the test means: %+v", want)
	}
	var token string
	if err := sqlDB(t, src).QueryRow(`SELECT token FROM leases`).Scan(&token); err != nil {
		t.Fatal(err)
	}
	sq.DB().Close()

	// Through the command line, with a password in the URL (the test
	// server trusts every connection, so any password does).
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate-store", "--from", src, "--to", u.String()}, &out, &errOut); code != 0 {
		t.Fatalf("migrate-store exit %d: %s%s", code, out.String(), errOut.String())
	}
	for _, s := range []string{"deliveries", "delivery_bodies", "queue", "audit", "train_groups", "lease fence", "rows", "bytes", "serve --db"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the output does not say %q:\n%s", s, out.String())
		}
	}
	t.Logf("migrate-store printed:\n%s%s", errOut.String(), out.String())
	if strings.Contains(out.String()+errOut.String(), "s3cret-pw") {
		t.Errorf("the password is printed:\n%s%s", out.String(), errOut.String())
	}
	if !regexp.MustCompile(`(?m)^migrate-store: [0-9]+ rows done in `).MatchString(errOut.String()) {
		t.Errorf("stderr has no progress: %s", errOut.String())
	}
	if !strings.Contains(errOut.String(), "must be stopped") {
		t.Errorf("stderr does not say mergegate must be stopped: %s", errOut.String())
	}

	pg := msOpen(t, dsn)
	if !pg.DB().Postgres() {
		t.Fatal("not PostgreSQL")
	}
	got := msRead(t, pg)
	msCompare(t, got, want)

	// The pending deliveries drain in arrival order, by seq.
	ctx := context.Background()
	var seen []int64
	res, err := pg.Drain(ctx, msKey, "worker", 10, msPrepare(&seen), leasedo.DrainPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	var wantSeqs []int64
	for _, d := range want.Pending {
		wantSeqs = append(wantSeqs, d.Seq)
	}
	sort.Slice(wantSeqs, func(i, j int) bool { return wantSeqs[i] < wantSeqs[j] })
	if !reflect.DeepEqual(seen, wantSeqs) || len(res.Done) != 3 {
		t.Fatalf("drained %v (%d done), want %v in arrival order", seen, len(res.Done), wantSeqs)
	}
	q, err := pg.Queue(ctx, msKey)
	if err != nil {
		t.Fatal(err)
	}
	var prs []int
	for _, e := range q {
		prs = append(prs, e.PRNumber)
	}
	if !reflect.DeepEqual(prs, []int{1, 2, 8, 5, 3, 4}) {
		t.Errorf("queue after the drain: %v, want 1 2 8 then 5 3 4 in arrival order", prs)
	}

	// New rows get ids past the copied ones.
	in := pg.NewInbox(4)
	b, _ := json.Marshal(msEvent(msKey, 6))
	msEnqueue(t, in, msKey, "d-6", b)
	in.Close()
	pend, err := pg.Deliveries(ctx, msKey, leasedo.DeliveryPending, 10)
	if err != nil || len(pend) != 1 || pend[0].Seq <= msMaxSeq(want.Pending, want.Failed, want.Done) {
		t.Fatalf("a new delivery: %+v %v (copied seqs up to %d)", pend, err, msMaxSeq(want.Pending, want.Failed, want.Done))
	}
	// A collision would be a duplicate key: the identities of queue,
	// events and audit start past the copied ids (1, 2, ... are taken).
	before, err := pg.Audit(ctx, msKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pg.ProcessEvent(ctx, msEvent(msKey, 7), "worker"); err != nil {
		t.Fatalf("a new queue entry after the copy: %v", err)
	}
	if au, err := pg.Audit(ctx, msKey); err != nil || len(au) != len(before)+1 {
		t.Fatalf("audit after a new entry: %d rows, was %d, %v", len(au), len(before), err)
	}
	// The fencing counter goes on from SQLite's.
	held, err := strconv.ParseInt(token, 10, 64)
	if err != nil {
		t.Fatalf("the held lease's token %q: %v", token, err)
	}
	l, err := pg.Acquire(ctx, leasedo.Key{Tenant: "7", Repo: "octo/new"}, "worker")
	if err != nil || l.Fence <= held {
		t.Fatalf("a new lease's fence %+v %v, want past %d", l, err, held)
	}
}

// Every table of either schema is copied (or is the schema's own
// bookkeeping): a table a later migration adds cannot be left behind.
func TestMigrateStoreCoversTheSchema(t *testing.T) {
	clearEnv(t)
	dsn := pgtest.URL(t)
	src := filepath.Join(t.TempDir(), "mergegate.db")
	msFill(t, src)
	// More rows than one batch holds, of another repository.
	bulk := leasedo.Key{Tenant: "8", Repo: "octo/bulk"}
	const nBulk = 2*migrateStoreBatch + 37
	{
		s := msOpen(t, src)
		in := s.NewInbox(256)
		for i := 0; i < nBulk; i++ {
			msEnqueue(t, in, bulk, fmt.Sprintf("bulk-%d", i), []byte(fmt.Sprintf(`{"n":%d}`, i)))
		}
		in.Close()
		s.DB().Close()
	}
	res, err := migrateStore(context.Background(), src, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	if err := msOpen(t, dsn).KeptDeliveries(context.Background(), bulk, time.Time{}, func(d leasedo.Delivery) error {
		bodies = append(bodies, string(d.Body))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != nBulk || bodies[0] != `{"n":0}` || bodies[nBulk-1] != fmt.Sprintf(`{"n":%d}`, nBulk-1) {
		t.Fatalf("%d bulk deliveries on PostgreSQL (want %d in arrival order): first %q last %q", len(bodies), nBulk, bodies[0], bodies[len(bodies)-1])
	}
	for i, b := range bodies {
		if b != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("bulk delivery %d on PostgreSQL is %q", i, b)
		}
	}
	copied := map[string]bool{}
	for _, n := range tableNames(res.Tables) {
		copied[n] = true
	}
	for n := range migrateStoreSkip {
		copied[n] = true
	}
	sdb, err := sql.Open("sqlite", "file:"+src+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	pdb, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	for _, c := range []struct {
		db *sql.DB
		q  string
	}{
		{sdb, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`},
		{pdb, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`},
	} {
		rows, err := c.db.Query(c.q)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			n++
			if !copied[name] {
				t.Errorf("table %s is not copied (%s)", name, c.q)
			}
		}
		rows.Close()
		if n < 15 {
			t.Errorf("only %d tables in %s", n, c.q)
		}
	}
	rows := map[string]int64{}
	for _, tc := range res.Tables {
		rows[tc.Name] = tc.Rows
	}
	for _, n := range []string{"deliveries", "delivery_bodies", "queue", "events", "audit", "leases", "repos", "installations", "check_outbox",
		"repo_policy", "freezes", "commands", "train_groups", "train_landed"} {
		if rows[n] == 0 {
			t.Errorf("no rows of %s copied: %v", n, rows)
		}
	}
	if res.Fence < 2 {
		t.Errorf("lease fence %d, want the SQLite counter (2 leases taken)", res.Fence)
	}

	// A SQLite table the PostgreSQL schema does not have is refused, not
	// skipped.
	extra := filepath.Join(t.TempDir(), "extra.db")
	msFill(t, extra)
	x, err := sql.Open("sqlite", extra)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Exec(`CREATE TABLE later_table (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	x.Close()
	if _, err := migrateStore(context.Background(), extra, pgtest.URL(t)); err == nil || !strings.Contains(err.Error(), "later_table") {
		t.Fatalf("a table PostgreSQL lacks: %v", err)
	}
}

// A target that holds data is refused and left as it was.
func TestMigrateStoreRefusesANonEmptyTarget(t *testing.T) {
	clearEnv(t)
	dsn := pgtest.URL(t)
	pg := msOpen(t, dsn)
	ctx := context.Background()
	if _, err := pg.ProcessEvent(ctx, msEvent(msKey, 99), "worker"); err != nil {
		t.Fatal(err)
	}
	before := msRead(t, pg)
	src := filepath.Join(t.TempDir(), "mergegate.db")
	msFill(t, src)
	var out, errOut bytes.Buffer
	code := run([]string{"migrate-store", "--from", src, "--to", dsn}, &out, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "already holds data") || !strings.Contains(errOut.String(), "queue (1 rows)") {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	msCompare(t, msRead(t, pg), before)
	// A second run after a successful one is refused as well.
	dsn2 := pgtest.URL(t)
	if _, err := migrateStore(ctx, src, dsn2); err != nil {
		t.Fatal(err)
	}
	if _, err := migrateStore(ctx, src, dsn2); err == nil || !strings.Contains(err.Error(), "already holds data") {
		t.Fatalf("second copy: %v", err)
	}
}

// A file that is not a mergegate database, or one at another schema
// version, is refused before the target is touched.
func TestMigrateStoreRefusesAnUnknownSource(t *testing.T) {
	clearEnv(t)
	dsn := pgtest.URL(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("not sqlite "), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	o, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Exec(`CREATE TABLE notes (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	o.Close()
	version := func(name string, stmt string) string {
		p := filepath.Join(dir, name)
		msFill(t, p)
		d, err := sql.Open("sqlite", p)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Exec(stmt, migrations.Latest()); err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := version("old.db", `DELETE FROM schema_version WHERE version = ?`)
	newer := version("newer.db", `INSERT INTO schema_version (version, name, applied_at) VALUES (? + 1, 'future', 0)`)
	for _, c := range []struct{ file, want string }{
		{junk, "not a mergegate database"},
		{other, "not a mergegate database"},
		{old, "mergegate migrate --db"},
		{newer, "newer than this binary"},
		{filepath.Join(dir, "missing.db"), "does not exist"},
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{"migrate-store", "--from", c.file, "--to", dsn}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%s: exit %d, want %q: %s", filepath.Base(c.file), code, c.want, errOut.String())
		}
	}
	// Nothing was made in the target.
	pdb, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	var n int
	if err := pdb.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the target has %d tables (%v), want none", n, err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate-store", "--from", old}, &out, &errOut); code != 2 {
		t.Errorf("without --to: exit %d %s", code, errOut.String())
	}
}
