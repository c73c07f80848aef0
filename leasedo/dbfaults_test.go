package leasedo

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sys/unix"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
)

// Database faults on PostgreSQL (issue 22, point 5): connections cut at
// exact moments by a pgtest.Proxy in front of the test server, whose
// other users are not touched.

// openPG opens a Store on dsn, closed when t ends.
func openPG(t *testing.T, dsn string) *Store {
	t.Helper()
	db, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewStore(db, Config{TTL: 30 * time.Second, Dead: 90 * time.Second, Clock: NewManualClock(t0)})
}

// proxied opens a Store on a fresh schema through a proxy.
func proxied(t *testing.T) (*Store, *pgtest.Proxy) {
	t.Helper()
	dsn, p := pgtest.NewProxy(t, pgtest.URL(t))
	return openPG(t, dsn), p
}

var faultKey = Key{Tenant: "1", Repo: "o/r"}

// stored counts the rows of delivery id: its row and its body's.
func stored(t *testing.T, s *Store, id string) (rows, bodies int) {
	t.Helper()
	rows = countRows(t, s, `SELECT count(*) FROM deliveries WHERE delivery_id = ?`, id)
	bodies = countRows(t, s, `SELECT count(*) FROM delivery_bodies b JOIN deliveries d ON d.seq = b.seq WHERE d.delivery_id = ?`, id)
	return rows, bodies
}

// The COMMIT never reaches the server: the enqueue fails (the webhook's
// 503), nothing of the delivery is stored, the failure is a storage
// failure (GET /healthz), and GitHub's redelivery stores it once.
func TestPostgresInboxCommitCutBeforeTheServerHasIt(t *testing.T) {
	s, p := proxied(t)
	in := s.NewInbox(0)
	defer in.Close()
	mustEnqueue(t, in, delivery("before", faultKey, `{"n":0}`))

	p.CutCommit(pgtest.CutBeforeCommit)
	_, err := in.Enqueue(context.Background(), delivery("cut", faultKey, `{"n":1}`))
	if err == nil {
		t.Fatal("enqueue whose COMMIT was cut answered stored")
	}
	if p.Armed() {
		t.Fatal("the proxy saw no COMMIT")
	}
	if f := s.db.LastWriteFailure(); f == nil || !IsStorageError(f.Err) {
		t.Fatalf("LastWriteFailure = %+v after a lost connection", f)
	}
	if rows, bodies := stored(t, s, "cut"); rows != 0 || bodies != 0 {
		t.Fatalf("the cut delivery left %d rows and %d bodies", rows, bodies)
	}
	dup, err := in.Enqueue(context.Background(), delivery("cut", faultKey, `{"n":1}`))
	if err != nil || dup {
		t.Fatalf("redelivery: dup=%v err=%v, want stored", dup, err)
	}
	if rows, bodies := stored(t, s, "cut"); rows != 1 || bodies != 1 {
		t.Fatalf("after the redelivery: %d rows, %d bodies, want 1 and 1", rows, bodies)
	}
	if f := s.db.LastWriteFailure(); f != nil {
		t.Fatalf("LastWriteFailure still %v after a commit", f.Err)
	}
	if rows, _ := stored(t, s, "before"); rows != 1 {
		t.Fatalf("the delivery stored before the cut: %d rows", rows)
	}
}

// The COMMIT reaches the server and commits, and its answer is lost: the
// enqueue fails (mergegate cannot know), and the redelivery, with the
// same delivery id, is a duplicate: stored once, applied once.
func TestPostgresInboxCommitAnswerLostRedeliveryIsADuplicate(t *testing.T) {
	s, p := proxied(t)
	in := s.NewInbox(0)
	defer in.Close()

	p.CutCommit(pgtest.CutAfterCommit)
	if _, err := in.Enqueue(context.Background(), delivery("ambiguous", faultKey, `{"n":1}`)); err == nil {
		t.Fatal("enqueue whose commit's answer was lost answered stored")
	}
	if rows, bodies := stored(t, s, "ambiguous"); rows != 1 || bodies != 1 {
		t.Fatalf("the committed delivery: %d rows, %d bodies, want 1 and 1", rows, bodies)
	}
	dup, err := in.Enqueue(context.Background(), delivery("ambiguous", faultKey, `{"n":1}`))
	if err != nil || !dup {
		t.Fatalf("redelivery: dup=%v err=%v, want a duplicate", dup, err)
	}
	if rows, _ := stored(t, s, "ambiguous"); rows != 1 {
		t.Fatalf("after the redelivery: %d rows", rows)
	}

	ctx := context.Background()
	l, err := s.Acquire(ctx, faultKey, "w")
	if err != nil {
		t.Fatal(err)
	}
	seq := seqOf(t, s, "ambiguous")
	for i, want := range []bool{true, false} {
		_, applied, err := s.ApplyDelivery(ctx, l, seq, Batch{})
		if err != nil || applied != want {
			t.Fatalf("apply #%d: applied=%v err=%v, want %v", i+1, applied, err, want)
		}
	}
}

// Every connection of mergegate's terminated on the server itself
// (pg_terminate_backend, as an operator or a restart does): the next
// delivery is stored without a restart of mergegate, and the engine's
// writes go on. Only this test's own backends are terminated (by their
// application_name): the server is shared.
func TestPostgresReconnectsAfterItsBackendsAreTerminated(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	app := "mergegate-" + strings.TrimPrefix(u.Query().Get("search_path"), "t_")
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	s := openPG(t, u.String())
	in := s.NewInbox(0)
	defer in.Close()
	ctx := context.Background()
	mustEnqueue(t, in, delivery("d1", faultKey, `{}`))
	// Hold several connections open at once, so that the pool keeps more
	// than one to be found dead.
	var hold []*sql.Conn
	for range 4 {
		c, err := s.db.w.DB.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hold = append(hold, c)
	}
	for _, c := range hold {
		c.Close()
	}

	admin, err := sql.Open("pgx", pgtest.Server(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	terminate := func() { pgtest.TerminateBackends(t, admin, app) }

	terminate()
	mustEnqueue(t, in, delivery("d2", faultKey, `{}`)) // the first write after: no 503
	l, err := s.Acquire(ctx, faultKey, "w")
	if err != nil {
		t.Fatalf("the engine's lease after the backends were terminated: %v", err)
	}
	if _, applied, err := s.ApplyDelivery(ctx, l, seqOf(t, s, "d2"), Batch{}); err != nil || !applied {
		t.Fatalf("apply after the backends were terminated: applied=%v err=%v", applied, err)
	}

	// Terminated again, an engine's write comes first: it may fail, once
	// (its transaction had begun on a dead connection); the pool is then
	// emptied and the next write connects anew.
	terminate()
	failures := 0
	for {
		_, err := s.RetryFailed(ctx, faultKey)
		if err == nil {
			break
		}
		if failures++; failures > 1 || !IsStorageError(err) {
			t.Fatalf("write #%d after the backends were terminated: %v", failures, err)
		}
	}
	mustEnqueue(t, in, delivery("d3", faultKey, `{}`))
	if err := s.db.ProbeWrite(ctx, time.Now()); err != nil {
		t.Fatalf("write probe after reconnecting: %v", err)
	}
}

// A server that does not answer (accepts, then silence): the enqueue
// fails on the connect timeout instead of holding the webhook past
// GitHub's 10 s, and succeeds once the server answers again.
func TestPostgresSilentServerFailsTheCommit(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("connect_timeout", "1")
	u.RawQuery = q.Encode()
	dsn, p := pgtest.NewProxy(t, u.String())
	s := openPG(t, dsn)
	in := s.NewInbox(0)
	defer in.Close()
	mustEnqueue(t, in, delivery("d1", faultKey, `{}`))

	p.SetSilent(true)
	_, err = in.Enqueue(context.Background(), delivery("d2", faultKey, `{}`))
	if err == nil || !IsStorageError(err) || !isConnLost(err) {
		t.Fatalf("enqueue to a silent server: %v, want a lost connection", err)
	}
	p.SetSilent(false)
	mustEnqueue(t, in, delivery("d2", faultKey, `{}`))

}

// The pool's settings: a connect timeout unless the DSN sets one, a ping
// timeout, and sockets with keep-alives and TCP_USER_TIMEOUT.
func TestPostgresConnectionSettings(t *testing.T) {
	for _, c := range []struct {
		dsn  string
		want time.Duration
	}{
		{"postgres://u@h/db", pgConnectTimeout},
		{"postgres://u@h/db?connect_timeout=2", 2 * time.Second},
		{"host=h dbname=db connect_timeout=7", 7 * time.Second},
	} {
		cfg, err := pgxpool.ParseConfig(c.dsn)
		if err != nil {
			t.Fatal(err)
		}
		configureFaults(cfg)
		if cfg.ConnConfig.ConnectTimeout != c.want || cfg.PingTimeout != pgPingTimeout {
			t.Errorf("%s: connect timeout %v, ping timeout %v; want %v, %v", c.dsn, cfg.ConnConfig.ConnectTimeout, cfg.PingTimeout, c.want, pgPingTimeout)
		}
	}

	s := openPG(t, pgtest.URL(t))
	c, err := s.db.pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	tc, ok := c.Conn().PgConn().Conn().(*net.TCPConn)
	if !ok {
		t.Fatalf("connection is a %T, want TCP", c.Conn().PgConn().Conn())
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var userTimeout, keepAlive int
	var serr error
	raw.Control(func(fd uintptr) { //nolint:errcheck
		if userTimeout, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT); serr != nil {
			return
		}
		keepAlive, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	})
	if serr != nil || userTimeout != int(pgUserTimeout.Milliseconds()) || keepAlive != 1 {
		t.Fatalf("socket: TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d (%v); want %d, 1", userTimeout, keepAlive, serr, pgUserTimeout.Milliseconds())
	}
}

// The write probe: a writable server passes; the outcome is kept for
// probeFresh; a read-only session, a server down are reported with the
// reason; once writable again it passes and ends LastWriteFailure.
func TestPostgresProbeWrite(t *testing.T) {
	s, p := proxied(t)
	ctx := context.Background()
	now := t0
	probe := func() error { return s.db.ProbeWrite(ctx, now) }
	if err := probe(); err != nil {
		t.Fatalf("probe of a writable server: %v", err)
	}

	p.SetReadOnly(true)
	p.CutAll()
	if err := probe(); err != nil {
		t.Fatalf("probe within %s of the last: %v, want the kept outcome", probeFresh, err)
	}
	now = now.Add(probeFresh)
	if err := probe(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("probe of a read-only server: %v, want ErrReadOnly", err)
	}

	p.SetDown(true)
	now = now.Add(probeFresh)
	if err := probe(); err == nil || !isConnLost(err) {
		t.Fatalf("probe of a server that is down: %v", err)
	}
	if f := s.db.LastWriteFailure(); f == nil {
		t.Fatal("a server down is not a write failure")
	}

	p.SetReadOnly(false)
	p.SetDown(false)
	now = now.Add(probeFresh)
	if err := probe(); err != nil {
		t.Fatalf("probe once the server is back: %v", err)
	}
	if f := s.db.LastWriteFailure(); f != nil {
		t.Fatalf("LastWriteFailure still %v after a probe committed", f.Err)
	}
}

// A DSN of several hosts with target_session_attrs=read-write, as for a
// primary and its standby: mergegate connects to the one that takes
// writes; after a failover (the primary down, the standby promoted) the
// next write connects to the new primary, with no restart.
func TestPostgresMultiHostDSNFollowsTheWritableHost(t *testing.T) {
	dsn, standby, primary := pgtest.Cluster(t)

	s := openPG(t, dsn)
	in := s.NewInbox(0)
	defer in.Close()
	ctx := context.Background()
	mustEnqueue(t, in, delivery("d1", faultKey, `{}`))
	if err := s.db.ProbeWrite(ctx, t0); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if primary.Accepted() == 0 {
		t.Fatal("no connection to the writable host")
	}

	// Failover: the primary goes away, the standby is promoted.
	primary.SetDown(true)
	standby.SetReadOnly(false)
	mustEnqueue(t, in, delivery("d2", faultKey, `{}`))
	if err := s.db.ProbeWrite(ctx, t0.Add(probeFresh)); err != nil {
		t.Fatalf("probe after the failover: %v", err)
	}
	if rows, _ := stored(t, s, "d1"); rows != 1 {
		t.Fatalf("d1 after the failover: %d rows", rows)
	}
}
