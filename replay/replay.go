package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

// Options tune an offline replay. The zero value replays with
// `serve`'s defaults: label "automerge" and auto-merge as triggers, merge
// method "merge", no branch protection.
type Options struct {
	// Scenario is what the payloads cannot say: branch protection, PRs
	// that start behind their base (see Scenario).
	Scenario Scenario
	// Triggers are the eligibility triggers; nil = rules.DefaultOptions().
	Triggers *rules.Options
	// MergeMethod is merge, squash or rebase; "" = merge.
	MergeMethod string
	// Files names where each delivery came from, for messages (Files[i]
	// for recs[i]); optional.
	Files []string
	// Warn receives one line per delivery mergegate refused (a repository
	// hook's delivery without an installation, for example) or that failed
	// to apply; nil = discarded. The state printed is unaffected.
	Warn io.Writer
	// Log receives mergegate's own log (zerolog JSON); nil = none.
	Log io.Writer
	// Strict stops the replay at the first delivery mergegate refuses
	// (an error naming it) instead of reporting it to Warn.
	Strict bool
	// SettleTimeout bounds the wait for mergegate to finish with one
	// delivery (default 15 s). A replay never waits on the wall clock
	// otherwise: a delivery that would need a timed retry (an outage, a
	// rate limit) is out of scope and stops the replay with an error.
	SettleTimeout time.Duration
}

// State is the printed result of an offline replay (docs/replay.md).
type State struct {
	Repos []RepoState `json:"repos"`
}

// RepoState is one (tenant, repo): its queue, audit and events in the
// protocol's shapes (docs/lease-protocol.md), and what mergegate did on GitHub.
type RepoState struct {
	Tenant        string                `json:"tenant"`
	Repo          string                `json:"repo"`
	Queue         []leasedo.Entry       `json:"queue"`
	Audit         []leasedo.AuditEntry  `json:"audit"`
	Events        []leasedo.LoggedEvent `json:"events"`
	Merges        []Merge               `json:"merges"`
	BranchUpdates []BranchUpdate        `json:"branchUpdates"`
	Comments      []Comment             `json:"comments"`
	LabelsRemoved []LabelRemoval        `json:"labelsRemoved"`
	// Reactions are mergegate's answers to comment commands.
	Reactions []Reaction `json:"reactions,omitempty"`
}

// Reaction is a reaction mergegate added to a comment.
type Reaction struct {
	CommentID int64  `json:"commentId"`
	Content   string `json:"content"`
}

// Merge is a merge mergegate made: the PR, the head sha it merged
// (the sha guard) and the method.
type Merge struct {
	PRNumber int    `json:"prNumber"`
	SHA      string `json:"sha"`
	Method   string `json:"method"`
}

// BranchUpdate is an update of a PR's branch from its base.
type BranchUpdate struct {
	PRNumber int    `json:"prNumber"`
	FromSHA  string `json:"fromSha"`
	ToSHA    string `json:"toSha"`
}

// Comment is a comment mergegate posted.
type Comment struct {
	PRNumber int    `json:"prNumber"`
	Body     string `json:"body"`
}

// LabelRemoval is a label mergegate removed.
type LabelRemoval struct {
	PRNumber int    `json:"prNumber"`
	Label    string `json:"label"`
}

// replayEpoch is the clock of a replay whose payloads carry no time.
var replayEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// replaySecret signs deliveries inside an offline replay; it never leaves
// the process.
const replaySecret = "mergegate-offline-replay"

// Offline runs recorded deliveries in-process against a fake GitHub
// and returns the final state as indented JSON (docs/replay.md).
//
// The App is built by app.New, as `serve` builds it, on a database in a
// temporary folder, and runs without listeners or cron (App.StartEngine):
// the webhook handler (signature, parsing, durable inbox in SQLite,
// duplicate delivery ids), the engine (lease, queue, gates read from
// GitHub, merges, bounces, the resync of newly tracked repositories) and
// the forge client, speaking HTTP on loopback to a fake GitHub whose world
// is built from the deliveries themselves (see world.apply). Deliveries go
// one at a time; the next is sent when mergegate has finished with the
// last. The clock is the payloads' own: each accepted delivery arrives at
// the latest time its payload carries, and at least one second after the
// one before (the clock never moves back). The same input gives the same
// output, byte for byte.
func Offline(ctx context.Context, recs []app.Recorded, opt Options) ([]byte, error) {
	st, err := offline(ctx, recs, opt)
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func offline(ctx context.Context, recs []app.Recorded, opt Options) (*State, error) {
	triggers := rules.DefaultOptions()
	if opt.Triggers != nil {
		triggers = *opt.Triggers
	}
	method := opt.MergeMethod
	if method == "" {
		method = forge.MethodMerge
	}
	warn := opt.Warn
	if warn == nil {
		warn = io.Discard
	}
	log := zerolog.Nop()
	if opt.Log != nil {
		log = zerolog.New(opt.Log).With().Timestamp().Logger()
	}
	settle := opt.SettleTimeout
	if settle <= 0 {
		settle = 15 * time.Second
	}
	name := func(i int) string {
		if i < len(opt.Files) && opt.Files[i] != "" {
			return opt.Files[i]
		}
		return fmt.Sprintf("delivery %d (%s)", i+1, recs[i].Delivery)
	}

	start := replayEpoch
	for _, r := range recs {
		if t := payloadTime(r.Event, r.Payload); !t.IsZero() {
			start = t
			break
		}
	}
	clk := leasedo.NewManualClock(start)

	gh := fakegithub.NewWithOptions(nil, fakegithub.Options{})
	defer gh.Close()
	dir, err := os.MkdirTemp("", "mergegate-replay-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	key := filepath.Join(dir, "app.pem")
	if err := os.WriteFile(key, gh.PrivateKeyPEM(), 0o600); err != nil {
		return nil, err
	}
	a, err := app.New(ctx, app.Config{
		DB: filepath.Join(dir, "replay.db"), WebhookSecret: replaySecret,
		AppID: gh.AppID(), PrivateKeyPath: key, GitHubURL: gh.URL(),
		// Never listened on, but a Config must be one serve would accept.
		AdminAddr: "127.0.0.1:0",
		// The cron is not started: an hour only satisfies Validate.
		ReconcileEvery: time.Hour,
		LeaseTTL:       30 * time.Second, LeaseDead: 90 * time.Second,
		TriggerLabel: triggers.TriggerLabel, AutoMerge: triggers.AutoMergeTrigger, MergeMethod: method,
		Clock: stillClock{clk},
	}, log)
	if err != nil {
		return nil, err
	}
	defer a.Shutdown(context.Background()) //nolint:errcheck // a replay's database is thrown away
	handler, err := a.PublicHandler()
	if err != nil {
		return nil, err
	}
	if err := a.StartEngine(); err != nil {
		return nil, err
	}
	store := a.Store

	drv := newDriver(gh, clk, opt.Scenario, start)
	for i, rec := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		body, err := drv.before(rec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name(i), err)
		}
		status, answer := postDelivery(handler, rec, body)
		drv.after(rec, body, status, answer)
		switch {
		case status >= 200 && status < 300:
			// stored, a duplicate delivery id, a ping
		case status >= 500:
			return nil, fmt.Errorf("%s: mergegate answered %d: %s", name(i), status, answer.Error)
		case opt.Strict:
			return nil, fmt.Errorf("%s: mergegate refused the delivery (%d): %s", name(i), status, answer.Error)
		default:
			fmt.Fprintf(warn, "%s: refused (%d): %s\n", name(i), status, answer.Error)
		}
		if err := waitIdle(ctx, a, settle); err != nil {
			return nil, fmt.Errorf("%s: %w", name(i), err)
		}
	}

	st, err := drv.state(ctx, store)
	if err != nil {
		return nil, err
	}
	for _, rs := range st.Repos {
		failed, err := store.Deliveries(ctx, leasedo.Key{Tenant: rs.Tenant, Repo: rs.Repo}, leasedo.DeliveryFailed, 1000)
		if err != nil {
			return nil, err
		}
		for _, d := range failed {
			fmt.Fprintf(warn, "delivery %s (%s): failed: %s\n", d.ID, d.Event, d.LastError)
		}
	}
	return st, nil
}

// stillClock is a replay's clock: its time is the deliveries' (the driver
// sets it) and stands still between them, so a retry the engine schedules
// is due at once. Offline, GitHub computes at once: the pass after a pause
// sees what a later one on GitHub would.
type stillClock struct{ *leasedo.ManualClock }

// NewTimer fires at once, whatever d.
func (c stillClock) NewTimer(time.Duration) leasedo.Timer { return c.ManualClock.NewTimer(0) }

// driver is what happens around each delivery of a replay: the
// clock and the fake GitHub's world before it, what was stored after.
type driver struct {
	gh     *fakegithub.Server
	clk    *leasedo.ManualClock
	world  *world
	now    time.Time
	first  bool
	stored map[string]bool
	keys   map[leasedo.Key]bool
}

func newDriver(gh *fakegithub.Server, clk *leasedo.ManualClock, sc Scenario, start time.Time) *driver {
	return &driver{gh: gh, clk: clk, world: newWorld(gh, sc), now: start, first: true,
		stored: map[string]bool{}, keys: map[leasedo.Key]bool{}}
}

// before prepares one delivery and returns its body as GitHub sends it
// (compact JSON). A delivery mergegate will accept moves the clock to its
// payload's time (at least a second after the last, never back) and makes
// the world look as its payload says. A redelivery (a delivery id already
// stored) is the same delivery: GitHub did not change and no time passed.
func (d *driver) before(rec app.Recorded) ([]byte, error) {
	body := compactJSON(rec.Payload)
	if d.stored[rec.Delivery] {
		return body, nil
	}
	meta, err := webhook.Parse(rec.Event, body)
	if err != nil || rec.Event == "ping" || meta.Tenant == "" {
		return body, nil // refused or answered without being stored
	}
	t := payloadTime(rec.Event, rec.Payload)
	if d.first {
		d.first = false
		if !t.IsZero() {
			d.now = t
		}
	} else {
		d.now = d.now.Add(time.Second)
		if t.After(d.now) {
			d.now = t
		}
	}
	d.clk.Set(d.now)
	return body, d.world.apply(meta.Tenant, rec, hookAppID(rec.Headers))
}

// after notes a delivery mergegate stored.
func (d *driver) after(rec app.Recorded, body []byte, status int, answer webhookAnswer) {
	if status != http.StatusAccepted || answer.Result != "stored" {
		return
	}
	d.stored[rec.Delivery] = true
	if meta, err := webhook.Parse(rec.Event, body); err == nil && meta.Repo != "" {
		d.keys[leasedo.Key{Tenant: meta.Tenant, Repo: meta.Repo}] = true
	}
}

// state is the final state: every (tenant, repo) a delivery named or the
// store tracks, in (tenant, repo) order.
func (d *driver) state(ctx context.Context, store *leasedo.Store) (*State, error) {
	keys := maps.Clone(d.keys)
	tracked, err := store.Tracked(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range tracked {
		keys[t.Key] = true
	}
	sorted := make([]leasedo.Key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].Tenant != sorted[j].Tenant {
			return sorted[i].Tenant < sorted[j].Tenant
		}
		return sorted[i].Repo < sorted[j].Repo
	})
	out := &State{Repos: []RepoState{}}
	for _, k := range sorted {
		rs, err := repoState(ctx, store, d.gh, d.world, k)
		if err != nil {
			return nil, err
		}
		out.Repos = append(out.Repos, rs)
	}
	return out, nil
}

// webhookAnswer is the handler's JSON answer.
type webhookAnswer struct {
	Result string `json:"result"`
	Error  string `json:"error"`
}

// postDelivery hands one delivery to the webhook handler as GitHub would
// send it, signed with the replay's own secret.
func postDelivery(h http.Handler, rec app.Recorded, body []byte) (int, webhookAnswer) {
	req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	for k, v := range rec.Headers {
		req.Header.Set(k, v)
	}
	webhook.SignDelivery(req.Header, replaySecret, rec.Event, rec.Delivery, body)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	var a webhookAnswer
	_ = json.Unmarshal(rr.Body.Bytes(), &a)
	return rr.Code, a
}

// waitIdle waits until every stored delivery is applied and the App has
// nothing under way (no pass running, no wake-up or retry pending, no
// resync).
func waitIdle(ctx context.Context, a *app.App, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := 100 * time.Microsecond
	for {
		keys, err := a.Store.PendingKeys(ctx)
		if err != nil {
			return err
		}
		if len(keys) == 0 && a.Busy() == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			what := "work under way"
			if len(keys) > 0 {
				what = fmt.Sprintf("deliveries pending for %s", keys[0])
			}
			return fmt.Errorf("mergegate did not settle within %s (%s): a delivery that needs a timed retry (GitHub unavailable, a rate limit) cannot be replayed offline", timeout, what)
		}
		time.Sleep(pause)
		pause = min(pause*2, 5*time.Millisecond)
	}
}

func repoState(ctx context.Context, store *leasedo.Store, gh *fakegithub.Server, w *world, k leasedo.Key) (RepoState, error) {
	rs := RepoState{Tenant: k.Tenant, Repo: k.Repo,
		Merges: []Merge{}, BranchUpdates: []BranchUpdate{}, Comments: []Comment{}, LabelsRemoved: []LabelRemoval{}}
	var err error
	if rs.Queue, err = store.Queue(ctx, k); err != nil {
		return rs, err
	}
	if rs.Audit, err = store.Audit(ctx, k); err != nil {
		return rs, err
	}
	if rs.Events, err = store.Events(ctx, k); err != nil {
		return rs, err
	}
	if w.repos[k.Repo] != k.Tenant {
		return rs, nil // not on this installation's GitHub: nothing done there
	}
	for _, m := range gh.Merges() {
		if m.Repo == k.Repo {
			rs.Merges = append(rs.Merges, Merge{PRNumber: m.PRNumber, SHA: m.SHA, Method: m.Method})
		}
	}
	for _, u := range gh.BranchUpdates() {
		if u.Repo == k.Repo {
			rs.BranchUpdates = append(rs.BranchUpdates, BranchUpdate{PRNumber: u.PRNumber, FromSHA: u.FromSHA, ToSHA: u.ToSHA})
		}
	}
	for _, c := range gh.Comments() {
		if c.Repo == k.Repo {
			rs.Comments = append(rs.Comments, Comment{PRNumber: c.PRNumber, Body: c.Body})
		}
	}
	for _, l := range gh.LabelsRemoved() {
		if l.Repo == k.Repo {
			rs.LabelsRemoved = append(rs.LabelsRemoved, LabelRemoval{PRNumber: l.PRNumber, Label: l.Label})
		}
	}
	for _, r := range gh.Reactions() {
		if r.Repo == k.Repo {
			rs.Reactions = append(rs.Reactions, Reaction{CommentID: r.CommentID, Content: r.Content})
		}
	}
	return rs, nil
}

// compactJSON is the payload as GitHub sends it (compact); a payload that
// is not valid JSON is sent as it stands, for the handler to refuse.
func compactJSON(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
