package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

const (
	testTenant = "1"
	testRepo   = "Codertocat/Hello-World"
	testSecret = "It's a Secret to Everybody"
	testBase   = "master"
)

var testKey = leasedo.Key{Tenant: testTenant, Repo: testRepo}

// harness runs the real App (store on a SQLite file, real listeners, the
// real forge client) against the fake GitHub, with an injected clock.
type harness struct {
	t      testing.TB
	gh     *fakegithub.Server
	app    *App
	clock  *leasedo.ManualClock
	pub    string // http://host:port of the public listener
	admin  string
	seq    atomic.Int64
	logBuf *testkit.SyncBuffer
	cfg    Config
	// horizon replaces retryHorizon (0: it): a drain under the write
	// budget moves the clock to every retry, a minute's wait included.
	horizon time.Duration
	// patience replaces eventually's 15 s of wall time (0: them): a drain
	// of a hundred pull requests under the race detector takes longer.
	patience time.Duration
	log      zerolog.Logger
}

type harnessOpt func(*Config)

// withWallClock starts the harness's clock at the wall clock's time
// instead of its fixed date. ghinstallation keeps the App's installation
// token until the wall clock says it expires, so the App then reuses one
// token, as in production, until GitHub (the fake, on the harness's
// clock) refuses it an hour on; on the fixed date, days behind, every
// request mints a token first.
func withWallClock(c *Config) {
	if c.Clock == nil {
		c.Clock = leasedo.NewManualClock(time.Now().UTC().Truncate(time.Second))
	}
}

// withoutGitHub runs mergegate with no App credentials: deliveries are
// applied to queues, gates wait.
func withoutGitHub(c *Config) { c.AppID, c.PrivateKeyPath = 0, "" }

func newHarness(t testing.TB, opts ...harnessOpt) *harness {
	t.Helper()
	return newHarnessLogging(t, zerolog.DebugLevel, opts...)
}

// newHarnessLogging is newHarness with its log at level.
func newHarnessLogging(t testing.TB, level zerolog.Level, opts ...harnessOpt) *harness {
	t.Helper()
	var probe Config // an option may start the clock elsewhere (withWallClock)
	for _, o := range opts {
		o(&probe)
	}
	clk, _ := probe.Clock.(*leasedo.ManualClock)
	if clk == nil {
		clk = leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	gh.AddRepo(testTenant, testRepo, testBase)
	// The payload examples' sender, Codertocat, owns the repository: on
	// GitHub the owner of a user's repository is its admin (a push by
	// the owner keeps the writer's consent to a queued head).
	gh.SetRole(testRepo, "Codertocat", "admin")
	dir := t.TempDir()
	keyPath := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(keyPath, gh.PrivateKeyPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DB: filepath.Join(dir, "mergegate.db"),
		WebhookSecret: testSecret, AppID: gh.AppID(), PrivateKeyPath: keyPath, GitHubURL: gh.URL(),
		ReconcileEvery: time.Hour, LeaseTTL: 30 * time.Second, LeaseDead: 90 * time.Second,
		TriggerLabel: "automerge", AutoMerge: true, MergeMethod: "squash", Clock: clk,
	}
	for _, o := range opts {
		o(&cfg)
	}
	logBuf := &testkit.SyncBuffer{}
	h := &harness{t: t, gh: gh, clock: clk, logBuf: logBuf, cfg: cfg,
		log: zerolog.New(logBuf).Level(level).With().Timestamp().Logger()}
	h.start()
	t.Cleanup(func() {
		h.stop()
		if t.Failed() {
			t.Logf("log:\n%s", logBuf.String())
		}
	})
	return h
}

// start runs a new App on the harness's configuration and database.
func (h *harness) start() {
	h.t.Helper()
	a, err := New(context.Background(), h.cfg, h.log)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		h.t.Fatal(err)
	}
	h.app = a
	pub, adm := a.Addrs()
	h.pub, h.admin = "http://"+pub, "http://"+adm
	// The cron's start-up pass runs first; tests begin after it.
	h.eventually("the start-up reconcile pass", func() bool { return a.Cron.Runs() >= 1 })
}

// stop shuts the App down as SIGTERM would.
func (h *harness) stop() {
	if h.app == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h.app.Shutdown(ctx) //nolint:errcheck
	h.app = nil
}

// restart stops mergegate and starts it again; with loseState, its
// database is deleted in between (state loss).
func (h *harness) restart(loseState bool) {
	h.t.Helper()
	h.stop()
	if loseState {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(h.cfg.DB + suffix); err != nil && !os.IsNotExist(err) {
				h.t.Fatal(err)
			}
		}
	}
	h.start()
}

// fixture reads a payload example and applies edits to it.
func (h *harness) fixture(name string, edit func(m map[string]any)) []byte {
	h.t.Helper()
	m := testkit.Payload(h.t, name)
	if edit != nil {
		edit(m)
	}
	out, err := json.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

// prPayload edits a pull_request example into PR n at sha with labels.
func (h *harness) prPayload(action string, n int, sha string, labels ...string) []byte {
	return h.prPayloadIn(testRepo, action, n, sha, labels...)
}

// prPayloadIn is prPayload for repository fullName (owner/name).
func (h *harness) prPayloadIn(fullName, action string, n int, sha string, labels ...string) []byte {
	file := map[string]string{"labeled": "labeled", "unlabeled": "unlabeled", "synchronize": "synchronize",
		"closed": "closed", "opened": "opened"}[action]
	if file == "" {
		file = "labeled"
	}
	return h.fixture("pull_request/"+file+".payload.json", func(m map[string]any) {
		m["action"] = action
		m["number"] = n
		repo := obj(m, "repository")
		repo["full_name"] = fullName
		repo["name"] = fullName[strings.Index(fullName, "/")+1:]
		pr := obj(m, "pull_request")
		pr["number"] = n
		pr["state"] = "open"
		if action == "closed" {
			pr["state"] = "closed"
		}
		pr["draft"] = false
		pr["auto_merge"] = nil
		obj(pr, "head")["sha"] = sha
		if action == "synchronize" {
			// GitHub's before: the head the push replaced.
			m["before"], m["after"] = h.gh.HeadBefore(fullName, sha), sha
		}
		obj(pr, "base")["ref"] = testBase
		var ls []any
		for _, l := range labels {
			ls = append(ls, map[string]any{"name": l})
		}
		pr["labels"] = ls
		if action == "labeled" || action == "unlabeled" {
			m["label"] = map[string]any{"name": "automerge"}
		}
	})
}

// send delivers a signed payload to the public listener.
func (h *harness) send(event string, body []byte) int {
	h.t.Helper()
	id := fmt.Sprintf("delivery-%d", h.seq.Add(1))
	return h.sendID(event, id, body)
}

func (h *harness) sendID(event, id string, body []byte) int {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.pub+"/webhook", bytes.NewReader(body))
	webhook.SignDelivery(req.Header, testSecret, event, id, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	return resp.StatusCode
}

func (h *harness) mustSend(event string, body []byte) {
	h.t.Helper()
	if code := h.send(event, body); code != http.StatusAccepted {
		h.t.Fatalf("%s delivery answered %d, want 202", event, code)
	}
}

// label: a PR labelled automerge (exists on the fake GitHub too).
func (h *harness) label(n int, sha string) {
	h.t.Helper()
	if _, ok := h.gh.PR(testRepo, n); !ok {
		h.gh.AddPR(testRepo, fakegithub.PR{Number: n, HeadSHA: sha, BaseRef: testBase, Labels: []string{"automerge"}, Author: "octocat"})
	} else {
		h.gh.SetLabels(testRepo, n, "automerge")
	}
	h.mustSend("pull_request", h.prPayload("labeled", n, sha, "automerge"))
}

// checkSuite: a check_suite completed for sha (checks re-read from GitHub).
func (h *harness) checkSuite(sha string) {
	h.t.Helper()
	h.mustSend("check_suite", h.fixture("check_suite/completed.payload.json", func(m map[string]any) {
		obj(m, "check_suite")["head_sha"] = sha
		obj(m, "check_suite")["pull_requests"] = []any{}
	}))
}

// pass: CI reports green for sha on GitHub, and GitHub tells mergegate.
func (h *harness) pass(sha string) {
	h.t.Helper()
	h.gh.SetCheckRun(testRepo, sha, "ci/build", "completed", "success")
	h.checkSuite(sha)
}

func (h *harness) queue() []leasedo.Item {
	h.t.Helper()
	items, err := h.app.Store.Items(context.Background(), testKey)
	if err != nil {
		h.t.Fatal(err)
	}
	return items
}

// eventually polls cond until it holds (synchronisation, not timing: the
// engine works asynchronously after the 202). While it does not hold, the
// clock is moved to the engine's next retry, if one is due within
// retryHorizon: a retry waits on the injected clock, and a test waits for
// its outcome, not for time to pass.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	wait := 15 * time.Second
	if h.patience > 0 {
		wait = h.patience
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		h.advanceToTimer()
		time.Sleep(5 * time.Millisecond)
	}
	h.t.Fatalf("timed out waiting for: %s\nqueue: %+v\nmerges: %+v", what, h.queue(), h.gh.Merges())
}

// waitLogged waits, without moving the clock, until the log holds the
// message msg at least n times: what a test that must not move time
// waits for instead of sleeping.
func (h *harness) waitLogged(msg string, n int) {
	h.t.Helper()
	testkit.Eventually(h.t, fmt.Sprintf("%d log lines %q", n, msg), func() bool {
		return strings.Count(h.logBuf.String(), `"message":"`+msg+`"`) >= n
	})
}

// settle waits until every delivery is applied and no worker runs, a
// pending retry included (eventually moves the clock to it).
func (h *harness) settle() {
	h.t.Helper()
	h.eventually("the engine to settle", func() bool {
		keys, err := h.app.Store.PendingKeys(context.Background())
		return err == nil && len(keys) == 0 && h.app.Engine.Busy() == 0
	})
}

// retryHorizon is how far eventually moves the clock on its own: to a
// retry due within it (GitHub computing, a held lease, an outage, a short
// rate limit). A longer wait (an operator's problem, retried in a minute)
// is one a test moves the clock to on purpose.
const retryHorizon = 15 * time.Second

// advanceToTimer moves the clock to the next pending timer's deadline if
// it is within retryHorizon: the engine's retries wait on the injected
// clock.
func (h *harness) advanceToTimer() {
	horizon := retryHorizon
	if h.horizon > 0 {
		horizon = h.horizon
	}
	if at, ok := h.clock.NextTimer(); ok && at.Sub(h.clock.Now()) <= horizon {
		h.clock.Set(at)
	}
}

func (h *harness) merges() []fakegithub.Merge { return h.gh.Merges() }

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
