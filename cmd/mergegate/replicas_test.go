package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

// Several replicas of `mergegate serve` on one PostgreSQL database and one
// GitHub (issue 22): three processes, one fake GitHub in the test process,
// a signed burst over 50 repositories (5 installations of 10) spread over
// the three webhook listeners, one replica hurt half-way through it.
//
// The burst: every repository has 3 pull requests, each labelled automerge
// (join), then passed (its check run goes green on GitHub, then a
// check_suite completed), then reported on by a status (a recheck). Its
// 9 deliveries are sent one after the other (each once the previous one
// was answered), so they have an arrival order; the repositories' senders
// run at once. mergegate merges the 3 pull requests in order and writes
// their check runs: the mutations the replicas must not make together.
//
// What every round checks, once all is settled:
//   - the replicas not hurt keep answering: every delivery sent to one of
//     them (and every one sent to the hurt one before it was hurt) gets a
//     202, within 5 s;
//   - every delivery that got a 202 is applied exactly once, and the
//     acknowledged deliveries of a repository are applied in their
//     arrival order (the events log, in the order written, holds each
//     stored delivery once, the acknowledged ones in arrival order); a
//     delivery that got no answer (sent to the replica hurt) is applied at
//     most once, wherever;
//   - never two mutating GitHub requests (any method but GET and HEAD) of
//     one repository in flight at once, as the fake saw them from arrival
//     to answer (it answers after a latency, so requests sent together
//     overlap there);
//   - every pull request that joined is merged, once.
const (
	replicaCount   = 3
	replicaRepos   = 50
	replicaTenants = 5
	replicaPRs     = 3
	// replicaTTL is the lease TTL the replicas run with (--lease-ttl),
	// short for a quick test.
	replicaTTL = 3 * time.Second
	// replicaSweep is the engine's sweep for due work no worker has
	// (app.sweepEvery).
	replicaSweep = 5 * time.Second
	// replicaAllowance is the time a 2-core machine shared with the
	// database and three replicas is allowed beyond TTL + sweep.
	replicaAllowance = time.Second
	// replicaBurst is about how long a burst's sending takes.
	replicaBurst = 6 * time.Second
	// replicaLatency is the fake GitHub's answer delay: a sync's calls
	// take time, so a replica hurt is hurt in the middle of some.
	replicaLatency = 20 * time.Millisecond
	replicaBase    = "main"
	replicaCheck   = "ci/build"
)

func replicaRounds() int {
	if longTests() {
		return 10
	}
	return 1
}

// Variant A: one replica killed with SIGKILL half-way through the burst.
// Beside the checks of every round: the repositories whose lease the dead
// replica held make progress again (a delivery applied or a mutation by
// another replica) within the lease TTL plus one sweep of the kill.
func TestReplicasOneKilledHalfWayLosesNothing(t *testing.T) {
	for r := range replicaRounds() {
		t.Run(fmt.Sprintf("round-%d", r), func(t *testing.T) { replicaRound(t, faultKill) })
	}
}

// Variant B: one replica stopped (SIGSTOP) half-way through the burst,
// at a moment it has a GitHub request out (in the middle of a pass), left
// stopped past the lease TTL while the others take its repositories over
// and finish them (up to TTL + sweep + 10 s), then resumed (SIGCONT).
//
// The property: a replica whose lease went stale makes no further GitHub
// call under it. What the test can see of it: a repository that another
// replica changed on GitHub while the paused one was stopped was taken
// over (its lease went stale and another replica took it; no replica
// changes a repository without its lease). If that repository is settled
// when the paused replica resumes (every delivery applied, no pull request
// left to merge, no lease held), the paused replica has nothing left to
// do there, even if it took the lease again: so any mutation of it it
// sends after it resumed comes from the pass it was stopped in, under the
// lease it lost. The check: for every repository another replica mutated
// during the pause and settled before the resume, the paused replica sends
// no mutation that arrives after it resumed. (Repositories the others
// could not take over, say the paused replica was stopped inside a
// transaction that locks one, are its own to go on with and not checked;
// the test says how many were checked, and fails if none were. The others
// must still go on with the rest: the check that they keep answering
// deliveries holds during the pause too.)
func TestReplicasOnePausedPastLeaseTTLMakesNoStaleCall(t *testing.T) {
	for r := range replicaRounds() {
		t.Run(fmt.Sprintf("round-%d", r), func(t *testing.T) { replicaRound(t, faultPause) })
	}
}

type replicaFault int

const (
	faultKill replicaFault = iota
	faultPause
)

// replicaDelivery is one delivery of the burst.
type replicaDelivery struct {
	id, event string
	repo      string
	tenant    string
	body      []byte
	key       string // what its row in the events log says (eventKey)
	order     int    // its place in its repository's arrival order
	before    func() // GitHub's side, done before it is sent
}

// replicaWorld is a round's GitHub, database and replicas.
type replicaWorld struct {
	t        *testing.T
	gh       *fakegithub.Server
	dsn      string
	db       *sql.DB
	names    []string
	servers  []*testkit.Server
	repos    []string
	tenantOf map[string]string
	plan     map[string][]replicaDelivery // repo -> its deliveries in arrival order
	byID     map[string]replicaDelivery
	mu       sync.Mutex
	green    map[string]bool // shas whose check passed on GitHub
}

func replicaRound(t *testing.T, fault replicaFault) {
	dsn := pgtest.URL(t)
	w := newReplicaWorld(t, dsn)
	hurt := rand.IntN(replicaCount)
	name := w.names[hurt]

	b := w.startBurst(hurt)
	<-b.halfway
	var tFault, tResume time.Time
	var held map[string]time.Time // repo -> lease ts, leases the hurt replica held at the kill
	switch fault {
	case faultKill:
		b.down.Store(int32(hurt))
		tFault = time.Now()
		b.faultAt.Store(tFault.UnixNano())
		w.servers[hurt].Kill()
		held = w.leasesHeldBy(name)
		t.Logf("killed %s at %s, half-way through the burst; it held the leases of %d repositories", name, tFault.Format("15:04:05.000"), len(held))
	case faultPause:
		// In the middle of a pass, between reading GitHub and acting on
		// what it read: while it reads the combined status of a head
		// whose check passed, the last fact it reads before it merges it.
		// (Failing such a moment within 3 s: while it has any request out.)
		for start := time.Now(); !w.aboutToMerge(name); {
			if waited := time.Since(start); waited > 3*time.Second && (len(w.gh.InFlightOf(name)) > 0 || waited > 5*time.Second) {
				t.Logf("%s read no passed head's status within 3s: stopped at another moment", name)
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		b.down.Store(int32(hurt))
		tFault = time.Now()
		b.faultAt.Store(tFault.UnixNano())
		w.servers[hurt].Signal(syscall.SIGSTOP)
		t.Logf("stopped %s at %s, half-way through the burst; it held the leases of %d repositories", name, tFault.Format("15:04:05.000"), len(w.leasesHeldBy(name)))
	}
	b.wait()

	var settledAtResume map[string]bool
	if fault == faultPause {
		// Past the TTL, until the others settled what they can.
		deadline := tFault.Add(replicaTTL + replicaSweep + 10*time.Second)
		time.Sleep(time.Until(tFault.Add(replicaTTL)))
		for time.Now().Before(deadline) && len(w.unsettled()) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		settledAtResume = map[string]bool{}
		for _, repo := range w.repos {
			settledAtResume[repo] = true
		}
		for _, repo := range w.unsettled() {
			settledAtResume[repo] = false
		}
		if u := w.unsettled(); len(u) > 0 {
			t.Logf("not settled by the others during the pause: %s\nthe database's sessions:%s", w.describe(u[:min(3, len(u))]), w.sessions())
		}
		tResume = time.Now()
		w.servers[hurt].Signal(syscall.SIGCONT)
		t.Logf("resumed %s at %s after %v; %d repositories not settled by the others then", name,
			tResume.Format("15:04:05.000"), tResume.Sub(tFault).Round(time.Millisecond), len(w.repos)-countTrue(settledAtResume))
	}

	// Everything settles: what was pending is applied, what joined merged.
	deadline := time.Now().Add(60 * time.Second)
	for len(w.unsettled()) > 0 {
		if time.Now().After(deadline) {
			u := w.unsettled()
			t.Fatalf("%d repositories not settled 60s after the burst, e.g. %s", len(u), w.describe(u[:min(3, len(u))]))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if fault == faultPause {
		// Time for a stale pass to show itself: it goes on at once (it
		// was stopped in the middle of one).
		time.Sleep(2 * time.Second)
	}
	w.checkLeasesQuiet()

	acked := b.ackedIDs()
	if len(acked) == 0 {
		t.Fatal("no delivery was acknowledged")
	}
	muts := w.gh.Mutations()
	w.checkAppliedOnceInOrder(acked)
	w.checkNoOverlap(muts)
	w.checkMergedOnce()
	switch fault {
	case faultKill:
		w.checkResumed(name, tFault, held, muts)
	case faultPause:
		w.checkNoStaleMutation(name, tFault, tResume, settledAtResume, muts)
	}
	t.Logf("%d deliveries sent, %d acknowledged; %d mutations, %d merges; %s hurt", b.sent.Load(), len(acked), len(muts), len(w.gh.Merges()), name)
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

func newReplicaWorld(t *testing.T, dsn string) *replicaWorld {
	gh := fakegithub.New(t)
	// A round compresses a busy hour of an organisation into seconds: 450
	// deliveries, 150 merges, some 600 writes over five installations in
	// well under a minute. GitHub's write limits (80 a minute) and
	// mergegate's budget under them (app's budget tests) would stretch it
	// to minutes; this test is about the leases, so both are lifted.
	gh.SetSecondaryLimits(false)
	gh.SetLatency(replicaLatency)
	w := &replicaWorld{t: t, gh: gh, dsn: dsn, tenantOf: map[string]string{}, plan: map[string][]replicaDelivery{}, byID: map[string]replicaDelivery{}, green: map[string]bool{}}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := range replicaRepos {
		repo := fmt.Sprintf("rep-org/r%02d", i)
		tenant := strconv.Itoa(101 + i%replicaTenants)
		w.repos = append(w.repos, repo)
		w.tenantOf[repo] = tenant
		gh.AddRepo(tenant, repo, replicaBase)
		gh.SetRequired(repo, replicaBase, []string{replicaCheck}, false)
		w.plan[repo] = w.planRepo(run, repo, tenant)
		for _, d := range w.plan[repo] {
			w.byID[d.id] = d
		}
	}
	keyPath := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyPath, gh.PrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w.db = db
	for i := range replicaCount {
		name := fmt.Sprintf("replica-%d", i+1)
		w.names = append(w.names, name)
		w.servers = append(w.servers, testkit.StartServer(t, binPath,
			"--db", dsn, "--webhook-secret", e2eSecret,
			"--app-id", strconv.FormatInt(gh.AppID(), 10), "--private-key", keyPath,
			"--lease-ttl", replicaTTL.String(), "--lease-dead", (3*replicaTTL).String(),
			"--reconcile-every", "1h", "--github-url", gh.URL(), "--replica", name,
			"--writes-per-minute", "0", "--writes-per-hour", "0"))
	}
	return w
}

func shaOf(repo string, pr int) string {
	return fakegithub.DeriveSHA(repo, "pr-"+strconv.Itoa(pr))
}

// planRepo is repo's 9 deliveries: 3 labels, 3 passes, 3 statuses.
func (w *replicaWorld) planRepo(run, repo, tenant string) []replicaDelivery {
	var out []replicaDelivery
	add := func(event string, m map[string]any, key string, before func()) {
		m["installation"] = map[string]any{"id": mustAtoi(tenant)}
		r := m["repository"].(map[string]any)
		r["full_name"] = repo
		r["name"] = repo[strings.Index(repo, "/")+1:]
		body, err := json.Marshal(m)
		if err != nil {
			w.t.Fatal(err)
		}
		out = append(out, replicaDelivery{
			id: fmt.Sprintf("%s-%s-%d", run, repo, len(out)), event: event, repo: repo, tenant: tenant,
			body: body, key: key, order: len(out), before: before,
		})
	}
	for n := 1; n <= replicaPRs; n++ {
		m := testkit.Payload(w.t, "pull_request/labeled.payload.json")
		m["action"], m["number"] = "labeled", n
		pr := m["pull_request"].(map[string]any)
		pr["number"], pr["state"], pr["draft"], pr["auto_merge"] = n, "open", false, nil
		pr["head"].(map[string]any)["sha"] = shaOf(repo, n)
		pr["base"].(map[string]any)["ref"] = replicaBase
		pr["labels"] = []any{map[string]any{"name": "automerge"}}
		m["label"] = map[string]any{"name": "automerge"}
		n := n
		add("pull_request", m, eventKey("pull_request", "labeled", n, shaOf(repo, n)), func() {
			w.gh.AddPR(repo, fakegithub.PR{Number: n, HeadSHA: shaOf(repo, n), BaseRef: replicaBase, Labels: []string{"automerge"}, Author: "octocat"})
		})
	}
	for n := 1; n <= replicaPRs; n++ {
		m := testkit.Payload(w.t, "check_suite/completed.payload.json")
		cs := m["check_suite"].(map[string]any)
		cs["head_sha"], cs["pull_requests"] = shaOf(repo, n), []any{}
		sha := shaOf(repo, n)
		add("check_suite", m, eventKey("check_suite", "completed", 0, sha), func() {
			w.gh.SetCheckRun(repo, sha, replicaCheck, "completed", "success")
			w.mu.Lock()
			w.green[sha] = true
			w.mu.Unlock()
		})
	}
	for n := 1; n <= replicaPRs; n++ {
		m := testkit.Payload(w.t, "status/with-installation.payload.json")
		m["sha"], m["state"], m["context"] = shaOf(repo, n), "success", "ci/other"
		add("status", m, eventKey("status", "success", 0, shaOf(repo, n)), nil)
	}
	return out
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}

// eventKey names a delivery by what its row in the events log says.
func eventKey(eventType, action string, pr int, sha string) string {
	return fmt.Sprintf("%s %s #%d %s", eventType, action, pr, sha)
}

// replicaBurst is a burst being sent.
type burst struct {
	w       *replicaWorld
	halfway chan struct{}
	down    atomic.Int32 // the listener not to send to any more (-1: none)
	faultAt atomic.Int64 // when the hurt replica was hurt (unix ns; 0: not yet)
	next    atomic.Int64 // round-robin over the listeners
	sent    atomic.Int64
	mu      sync.Mutex
	acked   map[string]bool
	// unanswered: deliveries a replica should have acknowledged (it was
	// not hurt, or not yet) that got no 202.
	unanswered []string
	wg         sync.WaitGroup
}

// startBurst sends every repository's deliveries, the repositories at
// once, each repository's one after the other with random gaps, round
// robin over the listeners (skipping the one down once it is). A delivery
// without an answer (the replica was killed or is stopped) is not sent
// again: GitHub marks it failed. halfway is closed once half the
// deliveries were answered.
func (w *replicaWorld) startBurst(hurt int) *burst {
	b := &burst{w: w, halfway: make(chan struct{}), acked: map[string]bool{}}
	b.down.Store(-1)
	total := replicaRepos * replicaPRs * 3
	var answered atomic.Int64
	var once sync.Once
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	gap := replicaBurst / time.Duration(replicaPRs*3)
	for _, repo := range w.repos {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			for _, d := range w.plan[repo] {
				time.Sleep(time.Duration(rand.Int64N(int64(2 * gap))))
				if d.before != nil {
					d.before()
				}
				pickedAt := time.Now()
				i := b.pick()
				req, _ := http.NewRequest(http.MethodPost, w.servers[i].Pub+"/webhook", bytes.NewReader(d.body))
				webhook.SignDelivery(req.Header, e2eSecret, d.event, d.id, d.body)
				b.sent.Add(1)
				res, err := client.Do(req)
				code := 0
				if err == nil {
					code = res.StatusCode
					res.Body.Close()
				}
				if code == http.StatusAccepted {
					b.mu.Lock()
					b.acked[d.id] = true
					b.mu.Unlock()
				} else if f := b.faultAt.Load(); i != hurt || f == 0 || pickedAt.UnixNano() > f {
					// Only the hurt replica may leave one unanswered, and
					// only one it had when it was hurt.
					b.mu.Lock()
					b.unanswered = append(b.unanswered, fmt.Sprintf("delivery %s (%s) sent to %s at %s: %d %v", d.id, repo, w.names[i], clock(pickedAt), code, err))
					b.mu.Unlock()
				}
				if answered.Add(1) >= int64(total/2) {
					once.Do(func() { close(b.halfway) })
				}
			}
		}()
	}
	return b
}

func (b *burst) pick() int {
	for {
		i := int(b.next.Add(1) % replicaCount)
		if int32(i) != b.down.Load() {
			return i
		}
	}
}

// wait waits for the burst's end; every delivery a replica not hurt got
// (and every one the hurt one got before) must have been acknowledged.
func (b *burst) wait() {
	b.wg.Wait()
	if n := len(b.unanswered); n > 0 {
		b.w.t.Errorf("%d deliveries to replicas not hurt (or sent before the fault) not acknowledged within 5 s, e.g.\n  %s", n, strings.Join(b.unanswered[:min(3, n)], "\n  "))
	}
}

func (b *burst) ackedIDs() map[string]bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.acked)
}

// aboutToMerge: replica is reading the combined status of a pull
// request's head whose check passed and that is first in its queue (every
// pull request before it merged).
func (w *replicaWorld) aboutToMerge(replica string) bool {
	for _, r := range w.gh.InFlightOf(replica) {
		if r.Route != fakegithub.RouteCombinedStatus {
			continue
		}
		for n := 1; n <= replicaPRs; n++ {
			if !strings.Contains(r.Path, "/commits/"+shaOf(r.Repo, n)+"/") {
				continue
			}
			pr, ok := w.gh.PR(r.Repo, n)
			if !ok || pr.Merged || !w.passed(r.Repo, n) {
				break
			}
			head := true
			for m := 1; m < n; m++ {
				if before, ok := w.gh.PR(r.Repo, m); ok && !before.Merged {
					head = false
				}
			}
			if head {
				return true
			}
		}
	}
	return false
}

func (w *replicaWorld) passed(repo string, n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.green[shaOf(repo, n)]
}

// leasesHeldBy lists the leases held by replica name: repo -> ts.
func (w *replicaWorld) leasesHeldBy(name string) map[string]time.Time {
	w.t.Helper()
	rows, err := w.db.Query(`SELECT repo, ts FROM leases WHERE held_by LIKE $1 || '/%'`, name)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var repo string
		var ts int64
		if err := rows.Scan(&repo, &ts); err != nil {
			w.t.Fatal(err)
		}
		out[repo] = time.UnixMilli(ts)
	}
	return out
}

// unsettled lists the repositories with work left: a pending delivery,
// an entry still in the queue (not merged, not bounced), or a check run
// still to end (the write budget paces them: one of 60 a minute per
// installation, shared by the replicas).
func (w *replicaWorld) unsettled() []string {
	w.t.Helper()
	q := `SELECT repo FROM deliveries WHERE state = 'pending'
		UNION SELECT repo FROM queue WHERE status NOT IN ('bounced')
		UNION SELECT repo FROM check_outbox`
	rows, err := w.db.Query(q)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var repo string
		if err := rows.Scan(&repo); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, repo)
	}
	sort.Strings(out)
	return out
}

// describe says where repos stand, for a failure.
func (w *replicaWorld) describe(repos []string) string {
	var b strings.Builder
	for _, repo := range repos {
		fmt.Fprintf(&b, "\n%s:", repo)
		rows, err := w.db.Query(`SELECT delivery_id, seq, state, attempts, last_error FROM deliveries WHERE repo = $1 AND state <> 'done' ORDER BY seq`, repo)
		if err == nil {
			for rows.Next() {
				var id, state, lastErr string
				var seq, attempts int64
				rows.Scan(&id, &seq, &state, &attempts, &lastErr) //nolint:errcheck
				fmt.Fprintf(&b, "\n  delivery %s seq %d %s attempts %d %s", id, seq, state, attempts, lastErr)
			}
			rows.Close()
		}
		rows, err = w.db.Query(`SELECT pr_number, status, gate_reason FROM queue WHERE repo = $1 ORDER BY id`, repo)
		if err == nil {
			for rows.Next() {
				var pr int
				var status, reason string
				rows.Scan(&pr, &status, &reason) //nolint:errcheck
				fmt.Fprintf(&b, "\n  queue #%d %s %s", pr, status, reason)
			}
			rows.Close()
		}
		rows, err = w.db.Query(`SELECT held_by, ts FROM leases WHERE repo = $1`, repo)
		if err == nil {
			for rows.Next() {
				var by string
				var ts int64
				rows.Scan(&by, &ts) //nolint:errcheck
				fmt.Fprintf(&b, "\n  lease held by %s since %s", by, time.UnixMilli(ts).Format("15:04:05.000"))
			}
			rows.Close()
		}
	}
	return b.String()
}

// sessions lists the database's sessions (of this test's user), what
// they run and wait for: why a repository is stuck.
func (w *replicaWorld) sessions() string {
	rows, err := w.db.Query(`SELECT pid, coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, ''),
		coalesce(to_char(xact_start, 'HH24:MI:SS.MS'), ''), left(query, 160)
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() ORDER BY xact_start NULLS LAST`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var pid int
		var state, wt, we, xact, query string
		rows.Scan(&pid, &state, &wt, &we, &xact, &query) //nolint:errcheck
		if state == "idle" {
			continue
		}
		fmt.Fprintf(&b, "\n  pid %d %s wait %s/%s xact since %s: %s", pid, state, wt, we, xact, strings.Join(strings.Fields(query), " "))
	}
	return b.String()
}

// checkLeasesQuiet: once the work is settled, the replicas stop taking
// leases: within a TTL and a sweep no lease is active, and a sweep later
// none is taken for 2 s (the fencing counter, which every acquisition
// moves, stands still).
func (w *replicaWorld) checkLeasesQuiet() {
	t := w.t
	t.Helper()
	fence := func() int64 {
		var n int64
		if err := w.db.QueryRow(`SELECT last_value FROM lease_fence`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	held := func() (int, string) { // active leases (a stale one left behind is anyone's to take)
		var n int
		var some string
		if err := w.db.QueryRow(`SELECT count(*), coalesce(min(repo || ' held by ' || held_by), '') FROM leases WHERE ts > $1`,
			time.Now().Add(-replicaTTL).UnixMilli()).Scan(&n, &some); err != nil {
			t.Fatal(err)
		}
		return n, some
	}
	deadline := time.Now().Add(replicaTTL + replicaSweep)
	for n, _ := held(); n > 0 && time.Now().Before(deadline); n, _ = held() {
		time.Sleep(50 * time.Millisecond)
	}
	n0, some := held()
	// A retry scheduled before the work settled (a lease found held
	// retries within 5 s) may still take a lease once: past a sweep,
	// nothing is due any more.
	time.Sleep(replicaSweep)
	f0, calls0 := fence(), len(w.gh.Calls())
	time.Sleep(2 * time.Second)
	n1, _ := held()
	f1, calls := fence(), w.gh.Calls()
	if n0 > 0 || f1 != f0 {
		t.Errorf("with nothing left to do, the replicas keep taking leases: %d held %v after the work settled (e.g. %s), %d leases taken in 2 s, %v after that (%d held at the end), %d GitHub calls meanwhile",
			n0, replicaTTL+replicaSweep, some, f1-f0, replicaSweep, n1, len(calls)-calls0)
	}
	if f1 != f0 {
		t.Logf("leases taken: the fencing counter went from %d to %d", f0, f1)
	}
}

// storedDelivery is a row of deliveries.
type storedDelivery struct {
	id, repo, state string
	seq             int64
	processed       time.Time
}

func (w *replicaWorld) storedDeliveries() map[string]storedDelivery {
	w.t.Helper()
	rows, err := w.db.Query(`SELECT delivery_id, repo, state, seq, coalesce(processed_at, 0) FROM deliveries`)
	if err != nil {
		w.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]storedDelivery{}
	for rows.Next() {
		var d storedDelivery
		var processed int64
		if err := rows.Scan(&d.id, &d.repo, &d.state, &d.seq, &processed); err != nil {
			w.t.Fatal(err)
		}
		if processed > 0 {
			d.processed = time.UnixMilli(processed)
		}
		out[d.id] = d
	}
	return out
}

// checkAppliedOnceInOrder: every acknowledged delivery stored and done;
// the events log of each repository holds every stored delivery once and
// nothing else, the acknowledged ones in their arrival order (which is
// also their seq order: each was sent after the previous one was
// committed).
func (w *replicaWorld) checkAppliedOnceInOrder(acked map[string]bool) {
	t := w.t
	t.Helper()
	stored := w.storedDeliveries()
	for id := range acked {
		d, ok := stored[id]
		switch {
		case !ok:
			t.Errorf("delivery %s (%s) acknowledged but not stored", id, w.byID[id].repo)
		case d.state != leasedo.DeliveryDone:
			t.Errorf("delivery %s (%s) acknowledged but %s", id, d.repo, d.state)
		}
	}
	for id, d := range stored {
		if _, ok := w.byID[id]; !ok {
			t.Errorf("stored delivery %s (%s) was never sent", id, d.repo)
		}
	}
	rows, err := w.db.Query(`SELECT id, repo, event_type, action, pr_number, coalesce(details, '') FROM events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	applied := map[string][]replicaDelivery{} // repo -> in the order applied
	for rows.Next() {
		var id int64
		var repo, eventType, action, details string
		var pr int
		if err := rows.Scan(&id, &repo, &eventType, &action, &pr, &details); err != nil {
			t.Fatal(err)
		}
		var det struct {
			Sha string `json:"sha"`
		}
		json.Unmarshal([]byte(details), &det) //nolint:errcheck
		key := eventKey(eventType, action, pr, det.Sha)
		var found *replicaDelivery
		for _, d := range w.plan[repo] {
			if d.key == key {
				found = &d
				break
			}
		}
		if found == nil {
			t.Errorf("event %d of %s (%s) is none of the deliveries sent", id, repo, key)
			continue
		}
		applied[repo] = append(applied[repo], *found)
	}
	for _, repo := range w.repos {
		seen := map[string]int{}
		var ackedOrder []int
		for _, d := range applied[repo] {
			seen[d.id]++
			if acked[d.id] {
				ackedOrder = append(ackedOrder, d.order)
			}
		}
		for _, d := range w.plan[repo] {
			_, isStored := stored[d.id]
			switch n := seen[d.id]; {
			case n > 1:
				t.Errorf("delivery %s (%s, %s) applied %d times", d.id, repo, d.key, n)
			case n == 0 && isStored:
				t.Errorf("delivery %s (%s, %s) stored (%s) but never applied", d.id, repo, d.key, stored[d.id].state)
			case n == 1 && !isStored:
				t.Errorf("delivery %s (%s, %s) applied but not stored", d.id, repo, d.key)
			}
		}
		if !slices.IsSorted(ackedOrder) {
			t.Errorf("%s: acknowledged deliveries applied in the order %v, not in arrival order", repo, ackedOrder)
		}
		// seq follows arrival for the acknowledged ones.
		var bySeq []storedDelivery
		for _, d := range w.plan[repo] {
			if acked[d.id] {
				bySeq = append(bySeq, stored[d.id])
			}
		}
		for i := 1; i < len(bySeq); i++ {
			if bySeq[i].seq < bySeq[i-1].seq {
				t.Errorf("%s: delivery %s arrived after %s but has a smaller seq (%d < %d)", repo, bySeq[i].id, bySeq[i-1].id, bySeq[i].seq, bySeq[i-1].seq)
			}
		}
	}
}

// checkNoOverlap: no two mutations of one repository in flight at once.
func (w *replicaWorld) checkNoOverlap(muts []fakegithub.Mutation) {
	t := w.t
	t.Helper()
	byRepo := map[string][]fakegithub.Mutation{}
	for _, m := range muts {
		if m.Repo != "" {
			byRepo[m.Repo] = append(byRepo[m.Repo], m)
		}
	}
	for repo, ms := range byRepo {
		sort.Slice(ms, func(i, j int) bool { return ms[i].Start.Before(ms[j].Start) })
		for i := 1; i < len(ms); i++ {
			// The latest end so far against the next start.
			prev := ms[i-1]
			for j := 0; j < i; j++ {
				if ms[j].End.After(prev.End) {
					prev = ms[j]
				}
			}
			if ms[i].Start.Before(prev.End) {
				t.Errorf("%s: two mutations in flight at once: %s %s by %s (%s..%s, %d) and %s %s by %s (%s..%s, %d)", repo,
					prev.Method, prev.Path, prev.Replica, clock(prev.Start), clock(prev.End), prev.Status,
					ms[i].Method, ms[i].Path, ms[i].Replica, clock(ms[i].Start), clock(ms[i].End), ms[i].Status)
			}
		}
	}
	for _, m := range muts {
		if m.Repo != "" && !slices.Contains(w.names, m.Replica) {
			t.Errorf("mutation %s %s names no replica of ours in its User-Agent %q", m.Method, m.Path, m.UserAgent)
			break
		}
	}
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }

// checkMergedOnce: every pull request that joined merged once, at its head.
func (w *replicaWorld) checkMergedOnce() {
	t := w.t
	t.Helper()
	merged := map[string]int{}
	for _, m := range w.gh.Merges() {
		merged[fmt.Sprintf("%s#%d", m.Repo, m.PRNumber)]++
		if m.SHA != shaOf(m.Repo, m.PRNumber) {
			t.Errorf("%s#%d merged at %s, not its head", m.Repo, m.PRNumber, m.SHA)
		}
	}
	rows, err := w.db.Query(`SELECT repo, pr_number FROM audit WHERE action = $1`, leasedo.AuditJoin)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var repo string
		var pr int
		if err := rows.Scan(&repo, &pr); err != nil {
			t.Fatal(err)
		}
		if k := fmt.Sprintf("%s#%d", repo, pr); merged[k] != 1 {
			t.Errorf("%s joined, merged %d times", k, merged[k])
		}
	}
}

// checkResumed: each repository whose lease the dead replica held at the
// kill makes progress (a delivery applied, or a mutation by another
// replica) within the TTL plus one sweep of the kill, if it had any left.
func (w *replicaWorld) checkResumed(dead string, killed time.Time, held map[string]time.Time, muts []fakegithub.Mutation) {
	t := w.t
	t.Helper()
	stored := w.storedDeliveries()
	bound := replicaTTL + replicaSweep + replicaAllowance
	var worst time.Duration
	measured := 0
	for repo := range held {
		var first time.Time
		for _, d := range stored {
			if d.repo == repo && d.processed.After(killed) && (first.IsZero() || d.processed.Before(first)) {
				first = d.processed
			}
		}
		for _, m := range muts {
			if m.Repo == repo && m.Replica != dead && m.Start.After(killed) && (first.IsZero() || m.Start.Before(first)) {
				first = m.Start
			}
		}
		if first.IsZero() {
			t.Logf("%s: no work after the kill, nothing to resume", repo)
			continue
		}
		measured++
		took := first.Sub(killed)
		worst = max(worst, took)
		t.Logf("%s: lease of %s (taken %s) resumed %v after the kill", repo, dead, clock(held[repo]), took.Round(time.Millisecond))
		if took > bound {
			t.Errorf("%s: the dead replica's repository resumed %v after the kill, want within %v (TTL %v + sweep %v + %v)", repo, took.Round(time.Millisecond), bound, replicaTTL, replicaSweep, replicaAllowance)
		}
	}
	t.Logf("resume after the kill: %d repositories measured, slowest %v", measured, worst.Round(time.Millisecond))
}

// checkNoStaleMutation: the property of TestReplicasOnePausedPastLeaseTTLMakesNoStaleCall.
func (w *replicaWorld) checkNoStaleMutation(paused string, stopped, resumed time.Time, settled map[string]bool, muts []fakegithub.Mutation) {
	t := w.t
	t.Helper()
	takenOver := map[string]bool{}
	for _, m := range muts {
		if m.Repo != "" && m.Replica != paused && m.Start.After(stopped) && m.Start.Before(resumed) {
			takenOver[m.Repo] = true
		}
	}
	checked := 0
	for _, repo := range w.repos {
		if !takenOver[repo] || !settled[repo] {
			continue
		}
		checked++
		for _, m := range muts {
			if m.Repo == repo && m.Replica == paused && m.Start.After(resumed) {
				t.Errorf("%s: %s, paused from %s to %s, sent %s %s at %s (answered %d) after another replica took the repository over and settled it",
					repo, paused, clock(stopped), clock(resumed), m.Method, m.Path, clock(m.Start), m.Status)
			}
		}
	}
	t.Logf("%d repositories taken over and settled during the pause checked for stale mutations", checked)
	if checked == 0 {
		t.Errorf("no repository was taken over and settled during the pause: the round tested nothing")
	}
}
