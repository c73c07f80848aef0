package reconcile

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

// Bounds of one sync, so that one busy repository cannot starve the rest
// nor spend the rate limit in a burst.
const (
	maxActionsPerSync = 20
	maxEvalsPerStep   = 5
	rulesCacheTTL     = time.Minute // a base's rules change rarely; every reading needs them
	methodsCacheTTL   = time.Hour   // a repository's merge methods, learned from a refusal or a read
	retryBase         = time.Second // the first pause; the engine waits on the injected clock
	maxRetryWait      = 30 * time.Second
)

// DefaultCheckTimeout bounces a head whose required checks have not
// concluded this long after it was pushed or joined.
const DefaultCheckTimeout = time.Hour

// Observer is told what a sync did, for metrics. Every method must be safe
// for concurrent use.
type Observer interface {
	Gate(result string, took time.Duration)
	Merged(k leasedo.Key, waited time.Duration)
	Bounced(k leasedo.Key, problem string)
	Blocked(k leasedo.Key, problem string)
	BranchUpdated(k leasedo.Key)
	Queue(k leasedo.Key, items []leasedo.Item, now time.Time)
}

// SyncConfig configures a Syncer.
type SyncConfig struct {
	Store  *leasedo.Store
	Forge  *forge.Client
	Policy rules.Policy
	Clock  leasedo.Clock
	Logger zerolog.Logger
	// Observer, when set, gets the sync's outcomes (metrics).
	Observer Observer
	// Policies are the repositories' own policies over Policy (default:
	// NewPolicies on Store and Forge).
	Policies *Policies
	// DashboardURL, when set, is where people reach mergegate's
	// dashboard: each check run links its repository's page there.
	DashboardURL string
	// OnDeadline, when set, is told after each Sync of k the nearest
	// check_timeout deadline ahead in its queues (zero: none), for the
	// engine to sync k again then (deadline.go).
	OnDeadline func(k leasedo.Key, at time.Time)
}

// Syncer runs the sync of one repository: the level-triggered pass that
// reads each queue entry from GitHub, asks rules.Decide what to do and does
// it. The engine runs it after applying deliveries, the cron after its
// resync; both the same way. It is safe for concurrent use; each call runs
// under the repository's lease.
type Syncer struct {
	cfg   SyncConfig
	store *leasedo.Store
	gh    *forge.Client
	log   zerolog.Logger
	clock leasedo.Clock

	policies *Policies
	logins   map[string]cached[string] // "app": the App's own login (isApp), under mu; made at first use
	// agree makes a queue agree with GitHub's open pull requests under
	// the policy in force (the Reconciler's, set by New; nil: none).
	agree func(ctx context.Context, l *leasedo.Lease) ([]leasedo.Fix, error)
	told  map[string]told // tenant@user: last replied to, under mu (commands.go)

	mu      sync.Mutex
	rules   map[string]cached[forge.Required]     // tenant:repo@branch
	methods map[string]cached[forge.MergeMethods] // tenant:repo
	retries map[string]int                        // tenant:repo#pr: pauses in a row
	perms   map[string]cached[forge.Permission]   // tenant:repo@user
	moved   map[string]time.Time                  // tenant:repo@base: when mergegate last merged into it
	wrote   map[string]cached[string]             // tenant:repo@branch: a train branch's tip as mergegate last wrote it, "" for none (train.go)
	done    map[string]cached[[]string]           // tenant:repo@sha: checks deliveries said concluded on it (Concluded)
	okd     map[string]cached[bool]               // tenant:repo#pr: a delivery said it was approved (Approved)
}

// NewSyncer returns a Syncer; zero fields of cfg take their defaults.
func NewSyncer(cfg SyncConfig) *Syncer {
	if cfg.Clock == nil {
		cfg.Clock = leasedo.SystemClock{}
	}
	if cfg.Policy.MergeMethod == "" {
		cfg.Policy.MergeMethod = forge.MethodMerge
	}
	if cfg.Policies == nil {
		cfg.Policies = NewPolicies(cfg.Store, cfg.Forge, cfg.Policy, cfg.Clock, cfg.Logger)
	}
	return &Syncer{
		cfg: cfg, store: cfg.Store, gh: cfg.Forge, log: cfg.Logger, clock: cfg.Clock, policies: cfg.Policies,
		rules: map[string]cached[forge.Required]{}, methods: map[string]cached[forge.MergeMethods]{}, retries: map[string]int{},
		perms: map[string]cached[forge.Permission]{}, moved: map[string]time.Time{}, wrote: map[string]cached[string]{},
		done: map[string]cached[[]string]{}, okd: map[string]cached[bool]{},
	}
}

// Approved records that a delivery said pull request pr of k's queue was
// just approved (webhook's Details.Approved): for rules.ReadLag a read of
// its reviews that does not count enough approvals is made again.
func (s *Syncer) Approved(k leasedo.Key, pr int) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	keep(s.okd, k.String()+"#"+strconv.Itoa(pr), cached[bool]{v: true, at: now}, rules.ReadLag)
}

// approvedLately: Approved was recorded for pr less than rules.ReadLag ago.
func (s *Syncer) approvedLately(k leasedo.Key, pr int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, _ := fresh(s.okd, k.String()+"#"+strconv.Itoa(pr), s.clock.Now(), rules.ReadLag)
	return ok
}

// maxConcluded bounds the checks remembered concluded on one sha, and
// maxCheckName their names: a delivery names them, and whoever holds the
// webhook secret can send many, and long ones (GitHub's shas are 40 hex
// digits, 64 with SHA-256).
const (
	maxConcluded = 32
	maxCheckName = 256
	maxSHA       = 64
)

// Concluded records that a delivery said check name concluded on sha (an
// entry's head or a train group's in k; webhook's Details.Check). For
// rules.ReadLag a read of sha's checks that shows it still running is
// taken for a read that lags, and made again.
func (s *Syncer) Concluded(k leasedo.Key, sha, name string) {
	if sha == "" || name == "" || len(sha) > maxSHA || len(name) > maxCheckName {
		return
	}
	now, key := s.clock.Now(), k.String()+"@"+sha
	s.mu.Lock()
	defer s.mu.Unlock()
	names, _ := fresh(s.done, key, now, rules.ReadLag)
	if !slices.Contains(names, name) && len(names) < maxConcluded {
		names = append(slices.Clip(names), name)
	}
	keep(s.done, key, cached[[]string]{v: names, at: now}, rules.ReadLag)
}

// concludedOn is what Concluded recorded for sha less than rules.ReadLag ago.
func (s *Syncer) concludedOn(k leasedo.Key, sha string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, _ := fresh(s.done, k.String()+"@"+sha, s.clock.Now(), rules.ReadLag)
	return names
}

// Sync moves k's queue forward under l, Tide-style: read the state, take
// the next action, repeat until nothing is left to do now; then bring the
// check runs up to date. It returns when to come back (0: at the next
// event) and the error that stopped it, sorted by the caller.
func (s *Syncer) Sync(ctx context.Context, l *leasedo.Lease) (time.Duration, error) {
	k := l.Key
	if s.gh == nil {
		return 0, nil
	}
	ctx = holding(ctx, s.store, l)
	if paused, err := s.store.Suspended(ctx, k.Tenant); err != nil || paused {
		return 0, err
	}
	marks, err := s.store.Marks(ctx, k)
	if err != nil {
		return 0, err
	}
	before := s.policies.Get(k)
	if now, err := s.policies.Ensure(ctx, k, marks); err != nil {
		if _, limited := forge.IsRateLimited(err); limited || ctx.Err() != nil {
			return 0, err
		}
		// The policy in force (or the defaults) runs the queue meanwhile.
		s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("could not read the repository's policy file; the policy in force stays")
	} else if policyChanged(before, now) {
		if err := s.underNewPolicy(ctx, l, now); err != nil {
			return 0, err
		}
	}
	if marks.Commands {
		if err := s.runCommands(ctx, l); err != nil {
			return 0, err
		}
	}
	if err := s.readOverdue(ctx, l); err != nil {
		return 0, err
	}
	var retry time.Duration
	handled := map[int]bool{} // waiting for a retry: not again in this sync
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if i == maxActionsPerSync {
			retry = minRetry(retry, 10*time.Millisecond) // more to do: come back at once, after other repos
			break
		}
		items, err := s.store.Items(ctx, k)
		if err != nil {
			return retry, err
		}
		progressed, wait, err := s.step(ctx, l, items, handled)
		retry = minRetry(retry, wait)
		if err != nil {
			return retry, err
		}
		if !progressed {
			break
		}
	}
	wait, err := s.publish(ctx, l)
	retry = minRetry(retry, wait)
	if err != nil {
		return retry, err
	}
	if err := s.reportDeadline(ctx, k); err != nil {
		return retry, err
	}
	if s.cfg.Observer != nil {
		items, err := s.store.Items(ctx, k)
		if err == nil {
			s.cfg.Observer.Queue(k, items, s.clock.Now())
		}
	}
	return retry, nil
}

// policyChanged: the policy in force is another file, or another version
// of it (a file with problems changes nothing: the last good one stays).
func policyChanged(before, now policy.Effective) bool {
	return before.Source != now.Source || before.File != now.File || before.SHA != now.SHA
}

// underNewPolicy runs k's queue under the policy just read, at once: what
// it may let move (a thaw, a blocking label or title no longer listed, a
// method now allowed) and what it changes about who is eligible (trigger
// labels, branches, auto-merge) is not left for the cron. The queue is
// made to agree with the open pull requests under it, and every entry
// that waits is read again, as the cron's pass does.
func (s *Syncer) underNewPolicy(ctx context.Context, l *leasedo.Lease, e policy.Effective) error {
	k := l.Key
	log := s.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Logger()
	if s.agree != nil {
		fixes, err := s.agree(ctx, l)
		for _, f := range fixes {
			log.Info().Int("pr", f.PRNumber).Str("sha", f.PRSha).Str("fix", f.Fix).Func(strIf("detail", f.Detail)).Msg("queue changed under the new policy")
		}
		if err != nil {
			return err
		}
	}
	n, err := s.store.Recheck(ctx, l, leasedo.StatusEvaluating, leasedo.StatusGatePassed, leasedo.StatusBlocked)
	if err != nil {
		return err
	}
	log.Info().Str("policy", inForce(e)).Int("read_again", n).Msg("policy changed: the queue is read again under it")
	return nil
}

// step takes one action on the queue: the head of each base branch's queue
// first, then the entries behind them that are to be read. It reports
// whether the queue changed.
func (s *Syncer) step(ctx context.Context, l *leasedo.Lease, items []leasedo.Item, handled map[int]bool) (bool, time.Duration, error) {
	k := l.Key
	train := map[string]bool{} // bases that run a merge train: no entry is a head there
	for _, it := range items {
		if _, ok := train[it.BaseRef]; !ok && it.BaseRef != "" {
			train[it.BaseRef] = s.policyOf(k, it.BaseRef).InTrain()
		}
	}
	heads := headsOf(items, train)
	var retry time.Duration
	for _, it := range items {
		if heads[it.PRNumber] && dueHead(it) && !handled[it.PRNumber] {
			changed, wait, err := s.advance(ctx, l, it, true, handled)
			if changed || err != nil {
				return changed, minRetry(retry, wait), err
			}
			retry = minRetry(retry, wait)
		}
	}
	evals := 0
	for _, it := range items {
		due := it.Status == leasedo.StatusQueued || (train[it.BaseRef] && dueHead(it))
		if heads[it.PRNumber] || !due || handled[it.PRNumber] || evals >= maxEvalsPerStep {
			continue
		}
		evals++
		changed, wait, err := s.advance(ctx, l, it, false, handled)
		if changed || err != nil {
			// A head's retry found before is kept: the entry is handled
			// for the rest of this sync, and only the retry brings it back.
			return changed, minRetry(retry, wait), err
		}
		retry = minRetry(retry, wait)
	}
	groups, err := s.store.Groups(ctx, k)
	if err != nil {
		return false, retry, err
	}
	for _, base := range s.trainBases(k, items, groups) {
		changed, wait, err := s.trainStep(ctx, l, base, items, groups, handled)
		if changed || err != nil {
			return changed, minRetry(retry, wait), err
		}
		retry = minRetry(retry, wait)
	}
	return false, retry, nil
}

// headsOf marks the head of each base branch's queue: its first entry that
// is neither bounced nor blocked. Queues of different bases never hold
// each other up. A base that runs a merge train (train) has no head: its
// entries are all judged at once, and its groups are merged.
func headsOf(items []leasedo.Item, train map[string]bool) map[int]bool {
	seen := map[string]bool{}
	heads := map[int]bool{}
	for _, it := range items {
		if it.Status == leasedo.StatusBounced || it.Status == leasedo.StatusBlocked || seen[it.BaseRef] || train[it.BaseRef] {
			continue
		}
		seen[it.BaseRef] = true
		heads[it.PRNumber] = true
	}
	return heads
}

// dueHead: a head is acted on when it is to be read (queued), or when its
// checks passed while it waited behind another and it has not been looked
// at as the head yet (no reason recorded).
func dueHead(it leasedo.Item) bool {
	return it.Status == leasedo.StatusQueued || (it.Status == leasedo.StatusGatePassed && it.GateReason == "")
}

// advance gathers the facts of one entry, decides and carries the decision
// out. It reports whether the queue changed and when to come back.
func (s *Syncer) advance(ctx context.Context, l *leasedo.Lease, it leasedo.Item, head bool, handled map[int]bool) (bool, time.Duration, error) {
	k := l.Key
	if it.BaseRef == "" {
		pr, err := s.gh.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if err != nil {
			return false, 0, err
		}
		if err := s.store.SetBase(ctx, l, it.PRNumber, pr.BaseRef); err != nil {
			return false, 0, err
		}
		return true, 0, nil // read the queue again: the entry's base decides its queue
	}
	pol := s.policyOf(k, it.BaseRef)
	f, err := s.facts(ctx, k, it, head || pol.InTrain())
	if err != nil {
		return false, 0, err
	}
	a := rules.Decide(f, pol)
	if pol.InTrain() {
		a = rules.DecideTrainEntry(f, pol)
	}
	if f.Gate.Result == forge.GateSuccess && it.GateResult != forge.GateSuccess {
		s.prLog(k, it.PRNumber, it.PRSha).Info().Str("reason", f.Gate.Reason).Msg("gate passed")
	}
	switch a.Kind {
	case rules.Merge, rules.UpdateBranch, rules.Block, rules.Bounce:
		if f.Gate.Result == forge.GateSuccess && it.GateResult != forge.GateSuccess {
			// The audit says the gate passed before what follows from it.
			if _, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusGatePassed, ""); err != nil {
				return false, 0, err
			}
		}
	}
	return s.carry(ctx, l, f, a, handled, 0)
}

func (s *Syncer) prLog(k leasedo.Key, pr int, sha string) *zerolog.Logger {
	l := s.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", pr).Str("sha", sha).Logger()
	return &l
}

// minRetry is the sooner of two retry delays, where 0 means none.
func minRetry(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// strIf adds key to a log line only when val is not empty: a line leaves
// out what does not apply rather than carry an empty key.
func strIf(key, val string) func(*zerolog.Event) {
	return func(e *zerolog.Event) {
		if val != "" {
			e.Str(key, val)
		}
	}
}
