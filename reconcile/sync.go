package reconcile

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

	mu      sync.Mutex
	rules   map[string]cached[forge.Required]     // tenant:repo@branch
	methods map[string]cached[forge.MergeMethods] // tenant:repo
	retries map[string]int                        // tenant:repo#pr: pauses in a row
	perms   map[string]cached[forge.Permission]   // tenant:repo@user
	moved   map[string]time.Time                  // tenant:repo@base: when mergegate last merged into it
}

type cached[T any] struct {
	v  T
	at time.Time
}

// fresh returns what m keeps under key when it was kept less than ttl
// ago (a clock that went back makes it stale). The caller holds s.mu.
func fresh[T any](m map[string]cached[T], key string, now time.Time, ttl time.Duration) (T, bool) {
	c, ok := m[key]
	if age := now.Sub(c.at); !ok || age < 0 || age >= ttl {
		var zero T
		return zero, false
	}
	return c.v, true
}

// readThrough returns what m keeps under key while fresh, or else what
// read answers, which it keeps. s.mu is not held across read (a GitHub
// call).
func readThrough[T any](s *Syncer, m map[string]cached[T], key string, ttl time.Duration, read func() (T, error)) (T, error) {
	now := s.clock.Now()
	s.mu.Lock()
	v, ok := fresh(m, key, now, ttl)
	s.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	s.mu.Lock()
	m[key] = cached[T]{v: v, at: now}
	s.mu.Unlock()
	return v, nil
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
		perms: map[string]cached[forge.Permission]{}, moved: map[string]time.Time{},
	}
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
	if _, err := s.policies.Ensure(ctx, k, marks); err != nil {
		if _, limited := forge.IsRateLimited(err); limited || ctx.Err() != nil {
			return 0, err
		}
		// The policy in force (or the defaults) runs the queue meanwhile.
		s.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("could not read the repository's policy file; the policy in force stays")
	}
	if marks.Commands {
		if err := s.runCommands(ctx, l); err != nil {
			return 0, err
		}
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
	if s.cfg.Observer != nil {
		items, err := s.store.Items(ctx, k)
		if err == nil {
			s.cfg.Observer.Queue(k, items, s.clock.Now())
		}
	}
	return retry, nil
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

// facts reads what the decision needs: the base's rules and the checks on
// the head sha (and, without required checks, the other Apps' suites); for
// a head whose checks passed, its reviews where the base requires them.
// The pull request itself is read only when GitHub refuses a merge or an
// update (refused): the guarded merge is GitHub's own check of the rest,
// and a lifecycle costs one read less.
func (s *Syncer) facts(ctx context.Context, k leasedo.Key, it leasedo.Item, head bool) (rules.Facts, error) {
	f := rules.Facts{Entry: it, Head: head, Now: s.clock.Now(), Retries: s.retryCount(k, it.PRNumber)}
	var err error
	if f.Rules, err = s.rulesOf(ctx, k, it.BaseRef); err != nil {
		return f, err
	}
	results, err := s.gh.CheckResults(ctx, k.Tenant, k.Repo, it.PRSha)
	if err != nil {
		return f, err
	}
	var suites []forge.CheckSuite
	if !f.Rules.Configured || len(f.Rules.Contexts) == 0 {
		if suites, err = s.gh.CheckSuites(ctx, k.Tenant, k.Repo, it.PRSha); err != nil {
			return f, err
		}
	}
	start := time.Now()
	f.Gate = forge.EvaluateGate(f.Rules, results, suites)
	if s.cfg.Observer != nil {
		s.cfg.Observer.Gate(f.Gate.Result, time.Since(start))
	}
	if readsGitHubQueue(f) {
		return f, s.mergeQueueFacts(ctx, k, &f) // mergequeue.go
	}
	if !head || f.Gate.Result != forge.GateSuccess {
		return f, nil
	}
	if s.policyOf(k, it.BaseRef).NeedsPR() || s.justMoved(k, it.BaseRef) {
		// Its labels, title or body decide or go into the merge; or
		// mergegate just merged into its base, and GitHub refuses a merge
		// ("Base branch was modified") until it has worked out the pull
		// request's mergeability again: a read that says so (mergeable
		// null) costs a point, a refused merge one of the installation's
		// writes.
		return f, s.readPR(ctx, k, &f)
	}
	f.Methods = s.knownMethods(k)
	return f, s.readReviews(ctx, k, &f)
}

// readPR fills f's snapshot of the pull request, the merge methods (from
// it, else read) and the reviews (when the base requires them).
func (s *Syncer) readPR(ctx context.Context, k leasedo.Key, f *rules.Facts) error {
	pr, err := s.gh.GetPR(ctx, k.Tenant, k.Repo, f.Entry.PRNumber)
	if err != nil {
		return err
	}
	f.PR = &pr
	f.Methods = pr.Methods
	if f.Methods == nil {
		m, err := s.methodsOf(ctx, k)
		if err != nil {
			return err
		}
		f.Methods = &m
	} else {
		s.rememberMethods(k, *f.Methods)
	}
	return s.readReviews(ctx, k, f)
}

// readReviews reads the reviews when the base requires them.
func (s *Syncer) readReviews(ctx context.Context, k leasedo.Key, f *rules.Facts) error {
	if f.Rules.Reviews > 0 || f.Rules.CodeOwners {
		r, err := s.gh.Reviews(ctx, k.Tenant, k.Repo, f.Entry.PRNumber)
		if err != nil {
			return err
		}
		f.Reviews = &r
	}
	return nil
}

// carry does what a decides for f's entry. A refused merge or branch
// update reads the pull request again and decides once more, with the
// refusal (depth 1); a second refusal in a row waits for the next pass.
func (s *Syncer) carry(ctx context.Context, l *leasedo.Lease, f rules.Facts, a rules.Action, handled map[int]bool, depth int) (bool, time.Duration, error) {
	k, it := l.Key, f.Entry
	log := s.prLog(k, it.PRNumber, it.PRSha)
	switch {
	case a.Kind == rules.Merge || a.Kind == rules.UpdateBranch || a.Kind == rules.Enqueue:
		// A pause in a row is counted until the call succeeds: a refusal
		// GitHub keeps giving is the author's after rules.MaxRetries.
	case a.Kind != rules.Wait || !a.Retry:
		s.resetRetry(k, it.PRNumber)
	}
	switch a.Kind {
	case rules.Wait:
		changed, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, a.Status, a.Reason)
		if err != nil {
			return false, 0, err
		}
		if changed {
			log.Debug().Str("status", a.Status).Func(strIf("reason", a.Reason)).Msg("waits")
		}
		if a.Retry {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		return changed, 0, nil

	case rules.Regate:
		sha := a.Sha
		if sha == "" {
			sha = it.PRSha
		}
		log.Info().Str("reason", a.Reason).Func(strIf("new_sha", a.Sha)).Func(strIf("base", a.Base)).Msg("gated again")
		_, err := s.store.Reevaluate(ctx, l, it.PRNumber, sha, a.Base, a.Reason)
		return true, 0, err

	case rules.Leave:
		log.Info().Str("reason", a.Reason).Msg("left the queue")
		return true, 0, s.store.Leave(ctx, l, it.PRNumber, a.Reason)

	case rules.Bounce:
		return true, 0, s.bounce(ctx, l, it, a)

	case rules.Block:
		changed, err := s.store.Block(ctx, l, it.PRNumber, it.PRSha, a.Reason)
		if err != nil {
			return false, 0, err
		}
		if changed && a.Problem == "held" {
			log.Info().Str("reason", strings.TrimPrefix(a.Reason, rules.HeldPrefix)).Msg("held back by the repository's policy; it keeps its place and the queue behind it goes on")
		} else if changed {
			// Once per change: each cron pass tries a blocked entry again.
			log.Warn().Str("problem", a.Problem).Str("reason", a.Reason).Msg("blocked: the operator must act; nobody is bounced")
			if s.cfg.Observer != nil {
				s.cfg.Observer.Blocked(k, a.Problem)
			}
		}
		return changed, 0, nil

	case rules.UpdateBranch:
		if depth > 0 && f.Refusal != nil && f.Refusal.Op == "update-branch" {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		method := s.policyOf(k, it.BaseRef).UpdateMethod
		var err error
		if method == policy.UpdateRebase {
			// GraphQL: the REST update-branch only merges. The rebase
			// rewrites the head's commits; their checks run again on the
			// new head, which is gated like any push.
			nodeID := ""
			if f.PR != nil {
				nodeID = f.PR.NodeID
			}
			_, err = s.gh.RebaseBranch(ctx, k.Tenant, k.Repo, it.PRNumber, nodeID, it.PRSha)
		} else {
			method = policy.UpdateMerge
			err = s.gh.UpdateBranch(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha)
		}
		if err == nil {
			s.resetRetry(k, it.PRNumber)
			log.Info().Str("base", it.BaseRef).Str("update_method", method).Msg("branch behind its base: asked GitHub to update it")
			if s.cfg.Observer != nil {
				s.cfg.Observer.BranchUpdated(k)
			}
			if err := s.store.MarkBranchUpdated(ctx, l, it.PRNumber, it.PRSha, ""); err != nil {
				return false, 0, err
			}
			_, err := s.store.Wait(ctx, l, it.PRNumber, it.PRSha, leasedo.StatusGatePassed, rules.UpdatingPrefix+it.BaseRef)
			return true, 0, err
		}
		return s.refused(ctx, l, f, "update-branch", "", err, handled, depth)

	case rules.Enqueue:
		return s.enqueue(ctx, l, f, handled, depth) // mergequeue.go

	case rules.Merge:
		if depth > 0 && f.Refusal != nil && f.Refusal.Op == "merge" {
			handled[it.PRNumber] = true
			return false, s.nextRetry(k, it.PRNumber), nil
		}
		return s.merge(ctx, l, f, a, handled, depth)
	}
	return false, 0, fmt.Errorf("%s: #%d: unknown action %v", k, it.PRNumber, a.Kind)
}

// merge merges the head at exactly its tested sha.
func (s *Syncer) merge(ctx context.Context, l *leasedo.Lease, f rules.Facts, a rules.Action, handled map[int]bool, depth int) (bool, time.Duration, error) {
	k, it := l.Key, f.Entry
	log := s.prLog(k, it.PRNumber, it.PRSha)
	pol := s.policyOf(k, it.BaseRef)
	mergeSHA, err := s.gh.MergeWith(ctx, k.Tenant, k.Repo, it.PRNumber, it.PRSha, a.Method, s.commitMessage(ctx, k, pol, f.PR))
	if err == nil {
		s.resetRetry(k, it.PRNumber)
		log.Info().Str("method", a.Method).Str("merge_sha", mergeSHA).Func(strIf("method_note", a.MethodNote)).Msg("merged")
		s.mu.Lock()
		s.moved[k.String()+"@"+it.BaseRef] = s.clock.Now()
		s.mu.Unlock()
		if err := s.merged(ctx, l, it, a); err != nil {
			return true, 0, err
		}
		if pol.DeleteBranch {
			s.deleteBranch(ctx, k, f.PR)
		}
		return true, 0, nil
	}
	if forge.IsTransient(err) {
		// The merge may have happened: read the PR before anything else.
		fresh, gerr := s.gh.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
		if gerr == nil && fresh.Merged && fresh.HeadSHA == it.PRSha {
			log.Info().Str("method", a.Method).Msg("merged (confirmed after an error answer)")
			return true, 0, s.merged(ctx, l, it, a)
		}
		return false, 0, err
	}
	return s.refused(ctx, l, f, "merge", a.Method, err, handled, depth)
}

func (s *Syncer) merged(ctx context.Context, l *leasedo.Lease, it leasedo.Item, a rules.Action) error {
	// One sentence that names the method once: "with squash", "with
	// squash, not merge (--merge-method): ...", "with rebase (the method
	// chosen with auto-merge)".
	with := a.Method
	switch {
	case strings.HasPrefix(a.MethodNote, a.Method+","):
		with = a.MethodNote
	case a.MethodNote != "":
		with = a.Method + " (" + a.MethodNote + ")"
	}
	summary := fmt.Sprintf("Merged at %s, the commit whose checks passed, with %s.", forge.ShortSHA(it.PRSha), with)
	if err := s.store.MarkMerged(ctx, l, it.PRNumber, it.PRSha, a.Method,
		leasedo.CheckRunEnd{Conclusion: "success", Title: "Merged", Summary: summary}); err != nil {
		return err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Merged(l.Key, time.Duration(s.clock.Now().UnixMilli()-it.QueuedAt)*time.Millisecond)
	}
	return nil
}

// refused sorts an error of a merge or an update: GitHub's refusal is
// decided on with the pull request read again; anything else (rate limits,
// outages, permissions of the App itself) goes back to the caller.
func (s *Syncer) refused(ctx context.Context, l *leasedo.Lease, f rules.Facts, op, method string, err error, handled map[int]bool, depth int) (bool, time.Duration, error) {
	kind, msg, ok := forge.RefusalOf(err)
	if !ok {
		return false, 0, err
	}
	k, it := l.Key, f.Entry
	s.prLog(k, it.PRNumber, it.PRSha).Info().Str("op", op).Str("github_message", msg).Msg("GitHub refused; sorting its answer")
	// The refusal may come from settings that changed since they were
	// read: read them again (the methods now, the rules next time).
	s.mu.Lock()
	delete(s.methods, k.String())
	delete(s.rules, k.String()+"@"+it.BaseRef)
	s.mu.Unlock()
	s.gh.ForgetRules(k.Tenant, k.Repo, it.BaseRef)
	if depth > 0 {
		handled[it.PRNumber] = true
		return false, s.nextRetry(k, it.PRNumber), nil
	}
	f.Refusal = &rules.Refusal{Kind: kind, Op: op, Method: method, Message: msg}
	if err := s.readPR(ctx, k, &f); err != nil {
		return false, 0, err
	}
	f.Now = s.clock.Now()
	return s.carry(ctx, l, f, rules.Decide(f, s.policyOf(k, it.BaseRef)), handled, depth+1)
}

// bounce takes the entry out of the queue and tells its author why, in one
// sentence (rules.BounceMessage): a comment, the check run, and the trigger
// label removed so that it does not rejoin by itself. The three wait in the
// outbox with the bounce, and go out through the write budget (publish):
// none is lost to a budget, an outage or a restart.
func (s *Syncer) bounce(ctx context.Context, l *leasedo.Lease, it leasedo.Item, a rules.Action) error {
	k := l.Key
	log := s.prLog(k, it.PRNumber, it.PRSha)
	labels := s.policyOf(k, it.BaseRef).Triggers.Labels()
	label := ""
	if len(labels) > 0 {
		label = labels[0]
	}
	msg := rules.BounceMessage(a.Bounced, it.PRSha, label)
	log.Info().Str("problem", a.Problem).Str("reason", a.Bounced.Because()).Msg("bounced")
	if err := s.store.Bounce(ctx, l, it.PRNumber, it.PRSha, a.Bounced.Because(), a.Bounced.Kind == rules.BounceGateFailure,
		leasedo.CheckRunEnd{Conclusion: "failure", Title: "Out of the merge queue", Summary: msg, Comment: msg, Unlabel: labels}); err != nil {
		return err
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Bounced(k, a.Problem)
	}
	return nil
}

// movedWindow is how long after mergegate's own merge into a base the next
// head's pull request is read before it is merged (GitHub recomputes
// mergeability within seconds).
const movedWindow = 30 * time.Second

// justMoved: mergegate merged into base within movedWindow.
func (s *Syncer) justMoved(k leasedo.Key, base string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.moved[k.String()+"@"+base]
	if age := s.clock.Now().Sub(at); !ok || age < 0 || age >= movedWindow {
		delete(s.moved, k.String()+"@"+base)
		return false
	}
	return true
}

// rulesOf reads a base branch's rules, kept for a minute.
func (s *Syncer) rulesOf(ctx context.Context, k leasedo.Key, branch string) (forge.Required, error) {
	return readThrough(s, s.rules, k.String()+"@"+branch, rulesCacheTTL, func() (forge.Required, error) {
		return s.gh.RequiredChecks(ctx, k.Tenant, k.Repo, branch)
	})
}

// methodsOf returns the repository's merge methods, read when not known.
func (s *Syncer) methodsOf(ctx context.Context, k leasedo.Key) (forge.MergeMethods, error) {
	if m := s.knownMethods(k); m != nil {
		return *m, nil
	}
	m, err := s.gh.MergeMethods(ctx, k.Tenant, k.Repo)
	if err != nil {
		return forge.MergeMethods{}, err
	}
	s.rememberMethods(k, m)
	return m, nil
}

// knownMethods returns the repository's merge methods when they were read
// within methodsCacheTTL, else nil.
func (s *Syncer) knownMethods(k leasedo.Key) *forge.MergeMethods {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := fresh(s.methods, k.String(), s.clock.Now(), methodsCacheTTL)
	if !ok {
		return nil
	}
	return &m
}

func (s *Syncer) rememberMethods(k leasedo.Key, m forge.MergeMethods) {
	s.mu.Lock()
	s.methods[k.String()] = cached[forge.MergeMethods]{v: m, at: s.clock.Now()}
	s.mu.Unlock()
}

// nextRetry is the pause before reading an entry again that GitHub is
// settling: retryBase, doubling with each pause in a row, up to 30 s.
func (s *Syncer) nextRetry(k leasedo.Key, pr int) time.Duration {
	key := k.String() + "#" + strconv.Itoa(pr)
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.retries[key]
	s.retries[key] = n + 1
	d := retryBase << min(n, 8)
	return min(d, maxRetryWait)
}

func (s *Syncer) retryCount(k leasedo.Key, pr int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.retries[k.String()+"#"+strconv.Itoa(pr)]
}

func (s *Syncer) resetRetry(k leasedo.Key, pr int) {
	key := k.String() + "#" + strconv.Itoa(pr)
	s.mu.Lock()
	delete(s.retries, key)
	s.mu.Unlock()
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
