package reconcile

import (
	"context"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

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
	keep(m, key, cached[T]{v: v, at: now}, ttl)
	s.mu.Unlock()
	return v, nil
}

// maxCached bounds each of the Syncer's caches: one of them has an entry
// per commenter (the permission of anyone who types a command), and
// anyone can comment.
const maxCached = 4096

// keep stores c under key in m, first dropping what is older than ttl
// when m is full, then, if it is still full, entries at random (a cache
// miss costs one read). The caller holds s.mu.
func keep[T any](m map[string]cached[T], key string, c cached[T], ttl time.Duration) {
	if _, ok := m[key]; !ok && len(m) >= maxCached {
		for k, old := range m {
			if age := c.at.Sub(old.at); age < 0 || age >= ttl {
				delete(m, k)
			}
		}
		for k := range m {
			if len(m) < maxCached {
				break
			}
			delete(m, k)
		}
	}
	m[key] = c
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
	if f.Gate.Result == forge.GatePending {
		f.Concluded = s.concludedOn(k, it.PRSha)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Gate(f.Gate.Result, time.Since(start))
	}
	if readsGitHubQueue(f) {
		return f, s.mergeQueueFacts(ctx, k, &f) // mergequeue.go
	}
	pol := s.policyOf(k, it.BaseRef)
	// A train that speculates judges an entry whose checks still run on
	// the rest (rules.DecideTrainEntry): read it as if they had passed.
	speculates := pol.InTrain() && pol.Train.Speculate && f.Gate.Result == forge.GatePending
	if !head || (f.Gate.Result != forge.GateSuccess && !speculates) {
		return f, nil
	}
	if pol.NeedsPR() || s.justMoved(k, it.BaseRef) {
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
		f.JustApproved = r.Approvals < f.Rules.Reviews && s.approvedLately(k, f.Entry.PRNumber)
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
