package reconcile

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

// ErrRateLow says a pass stopped because the tenant's rate-limit points fell
// below MinRateRemaining; what is left waits for the next pass.
var ErrRateLow = errors.New("rate limit low: the rest waits for the next pass")

// Fix names (results.fixed[].fix) of the resync, beside leasedo's integrity
// fixes (duplicate_removed, bounced_removed, corrupt_removed).
const (
	FixJoined      = "joined"
	FixLeft        = "left"
	FixReevaluated = "reevaluated"
)

// resync is the leasedo.ResyncFunc: it runs under the cron's lease, after
// the integrity fixes, and makes the queue agree with GitHub's open pull
// requests. One listing per repository; a listing that did not change is a
// 304 and costs no rate-limit point. An empty queue (state lost) is rebuilt
// by the same rule: every eligible open PR is missing, so every one joins,
// at its GitHub trigger time. Then every entry that waits is read again (a
// check or review event that was lost is repaired here), and the queue is
// moved on by the same sync the engine runs.
func (r *Reconciler) resync(ctx context.Context, l *leasedo.Lease) ([]leasedo.Fix, error) {
	ctx = holding(ctx, r.store, l)
	k := l.Key
	if err := r.rateFloor(k.Tenant); err != nil {
		return nil, fmt.Errorf("%s: %w", k, err)
	}
	// The policy first: it says which pull requests are eligible. An
	// unchanged file is a 304.
	if _, err := r.syncer.policies.Refresh(r.withRateFloor(ctx, k.Tenant), k, false); err != nil {
		if _, limited := forge.IsRateLimited(err); limited || errors.Is(err, ErrRateLow) || ctx.Err() != nil {
			return nil, err
		}
		r.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Msg("resync: could not read the repository's policy file; the policy in force stays")
	}
	fixes, err := r.agree(ctx, l)
	if err != nil {
		return fixes, err
	}
	if cronPass(ctx) {
		after, err := r.store.Items(ctx, k)
		if err != nil {
			return fixes, err
		}
		if _, err := r.store.RecheckPRs(ctx, l, r.toRecheck(k, after, r.clock.Now())); err != nil {
			return fixes, err
		}
	} else if _, err := r.store.Recheck(ctx, l, leasedo.StatusEvaluating, leasedo.StatusGatePassed, leasedo.StatusBlocked); err != nil {
		return fixes, err
	}
	wait, err := r.syncer.Sync(ctx, l)
	if _, held := forge.IsWriteBudget(err); held || (err == nil && wait > 0) {
		// Writes the budget held back (check runs of rebuilt entries, a
		// merge) or more to do: the engine's worker follows up, on its
		// own retries, past this pass's deadline.
		if r.onChange != nil {
			r.onChange(l.Key)
		}
		err = nil
	}
	return fixes, err
}

// agree makes k's queue agree with GitHub's open pull requests under the
// policy in force: closed and no longer eligible ones leave, moved heads
// are gated again, eligible ones that are missing join. The cron's resync
// runs it on every pass; the Syncer when the policy it reads changed (a
// trigger label the new file adds, a repository first heard of through a
// pull request's delivery translated under the defaults).
func (r *Reconciler) agree(ctx context.Context, l *leasedo.Lease) ([]leasedo.Fix, error) {
	k := l.Key
	items, err := r.store.Items(ctx, k)
	if err != nil {
		return nil, err
	}
	prs, err := r.forge.ListOpenPRs(r.withRateFloor(ctx, k.Tenant), k.Tenant, k.Repo)
	if err != nil {
		return nil, err
	}
	open := make(map[int]forge.PR, len(prs))
	for _, pr := range prs {
		open[pr.Number] = pr
	}
	fixes, queued, err := r.syncQueued(ctx, l, items, open)
	if err != nil {
		return fixes, err
	}
	joined, err := r.joinMissing(ctx, l, prs, queued)
	return append(fixes, joined...), err
}

type cronPassKey struct{}

// cronPass: ctx is the cron's pass over every repository (RunAll), not a
// pass asked for one repository (POST /reconcile, mergegate reconcile).
func cronPass(ctx context.Context) bool {
	on, _ := ctx.Value(cronPassKey{}).(bool)
	return on
}

// recheckSpread is how many cron passes it takes to read every waiting
// entry behind the heads again (a sixth each pass: with the 5-minute
// period, each about every half hour).
const recheckSpread = 6

// toRecheck are the entries the cron's pass reads again, so that a check
// or review event that was lost is repaired: the head of each serial
// base (a lost event there holds up the queue), every entry of a train
// base (the train judges them together), every blocked entry (the
// operator may have fixed it), and a sixth of the others, in turn. Reading
// every entry every pass cost three requests each, 30,000 a pass over
// 10,000 queued entries: more than an installation's hourly quota at
// GitHub's pace, and no longer inside the period. An entry behind the
// head whose event was lost is read when it becomes the head, at the
// latest.
func (r *Reconciler) toRecheck(k leasedo.Key, items []leasedo.Item, now time.Time) []int {
	turn := int(now.Unix()/int64((5*time.Minute)/time.Second)) % recheckSpread
	heads := map[string]bool{}
	var out []int
	for _, it := range items {
		switch it.Status {
		case leasedo.StatusEvaluating, leasedo.StatusGatePassed, leasedo.StatusBlocked:
		default:
			continue
		}
		head := !heads[it.BaseRef] && it.Status != leasedo.StatusBlocked
		if head {
			heads[it.BaseRef] = true
		}
		if head || it.Status == leasedo.StatusBlocked || it.BaseRef == "" || r.syncer.policyOf(k, it.BaseRef).InTrain() ||
			rules.InGitHubQueue(it) || (it.PRNumber+turn)%recheckSpread == 0 {
			out = append(out, it.PRNumber)
		}
	}
	return out
}

// syncQueued removes queued PRs that are closed (confirmed with a GET: the
// listing may lag) or no longer eligible and reevaluates those whose head
// (or base) moved. It returns the PR numbers still queued.
func (r *Reconciler) syncQueued(ctx context.Context, l *leasedo.Lease, items []leasedo.Item, open map[int]forge.PR) ([]leasedo.Fix, map[int]bool, error) {
	var fixes []leasedo.Fix
	queued := map[int]bool{}
	now := r.clock.Now()
	k := l.Key
	for _, it := range items {
		queued[it.PRNumber] = true
		if it.Status == leasedo.StatusBounced {
			continue // integrity fixes removed these; never resurrect one
		}
		pr, isOpen := open[it.PRNumber]
		why := ""
		if isOpen {
			why = r.ineligibility(k, pr)
			if why == "" {
				if err := r.takePriority(ctx, l, it, pr); err != nil {
					return fixes, queued, err
				}
			}
		}
		moved := isOpen && why == "" && pr.HeadSHA != it.PRSha
		rebased := isOpen && why == "" && !moved && it.BaseRef != "" && pr.BaseRef != "" && pr.BaseRef != it.BaseRef
		if (!isOpen || why != "" || moved) && r.recent(it, now) {
			r.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", it.PRNumber).Str("sha", it.PRSha).
				Msg("resync: entry changed within the grace period; GitHub's listing may lag, next pass decides")
			continue
		}
		var fix leasedo.Fix
		var err error
		switch {
		case !isOpen:
			// Missing from the open list: ask GitHub before leaving.
			fresh, gerr := r.forge.GetPR(ctx, k.Tenant, k.Repo, it.PRNumber)
			switch {
			case gerr != nil && !forge.IsNotFound(gerr):
				return fixes, queued, gerr
			case gerr == nil && fresh.State == "open":
				r.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", it.PRNumber).
					Msg("resync: open on GitHub though not listed; the listing lags, next pass decides")
				continue
			}
			detail := "closed on GitHub"
			if fresh.Merged {
				detail = "merged outside mergegate"
			}
			err = r.store.Leave(ctx, l, it.PRNumber, "resync: "+detail)
			fix = leasedo.Fix{Fix: FixLeft, PRNumber: it.PRNumber, PRSha: it.PRSha, Detail: detail}
		case why != "":
			err = r.store.Leave(ctx, l, it.PRNumber, "resync: no longer eligible: "+why)
			fix = leasedo.Fix{Fix: FixLeft, PRNumber: it.PRNumber, PRSha: it.PRSha, Detail: "no longer eligible: " + why}
		case moved:
			_, err = r.store.Reevaluate(ctx, l, it.PRNumber, pr.HeadSHA, pr.BaseRef, "resync: head moved from "+forge.ShortSHA(it.PRSha))
			fix = leasedo.Fix{Fix: FixReevaluated, PRNumber: it.PRNumber, PRSha: pr.HeadSHA, Detail: "head moved from " + forge.ShortSHA(it.PRSha)}
		case rebased:
			_, err = r.store.Reevaluate(ctx, l, it.PRNumber, it.PRSha, pr.BaseRef, "resync: base changed from "+it.BaseRef)
			fix = leasedo.Fix{Fix: FixReevaluated, PRNumber: it.PRNumber, PRSha: it.PRSha, Detail: fmt.Sprintf("base changed from %s to %s", it.BaseRef, pr.BaseRef)}
		default:
			if it.BaseRef == "" && pr.BaseRef != "" {
				// Learned quietly: joins through POST /event may lack it.
				if err := r.store.SetBase(ctx, l, it.PRNumber, pr.BaseRef); err != nil {
					return fixes, queued, err
				}
			}
			continue
		}
		if err != nil {
			return fixes, queued, err
		}
		if fix.Fix == FixLeft {
			delete(queued, it.PRNumber)
		}
		fixes = append(fixes, fix)
	}
	return fixes, queued, nil
}

// missing is an eligible open PR that is not queued, with its GitHub
// trigger time.
type missing struct {
	pr     forge.PR
	at     time.Time
	source string // what the time is
	// labeledBy added the trigger label, when the label is the trigger
	// (checked under label_requires_write).
	labeledBy string
}

// joinMissing joins the eligible open PRs that are not queued, in GitHub's
// order: the time their trigger (label or auto-merge) was set, which
// becomes their queuedAt. It reads issue events only for these PRs, several
// at once (EventReads), so a rebuild is not one round trip per PR; forge
// bounds the installation's requests in flight. The requests are the same
// ones, one per PR, as read one after the other.
func (r *Reconciler) joinMissing(ctx context.Context, l *leasedo.Lease, prs []forge.PR, queued map[int]bool) ([]leasedo.Fix, error) {
	k := l.Key
	var cands []forge.PR
	for _, pr := range prs {
		if !queued[pr.Number] && r.ineligibility(k, pr) == "" {
			cands = append(cands, pr)
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	audit, err := r.store.Audit(ctx, k)
	if err != nil {
		return nil, err
	}
	// reads[i] is cands[i]'s trigger time; each goroutine writes only its
	// own element, read after wg.Wait.
	type read struct {
		m  missing
		ok bool
	}
	reads := make([]read, len(cands))
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopErr error // the first error that stops the reads
	)
	stop := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if stopErr == nil {
			stopErr = err
		}
	}
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return stopErr != nil
	}
	// At most r.eventReads reads at once (more would only wait on forge's
	// per-installation slots), each after the rate floor is checked.
	inFlight := make(chan struct{}, r.eventReads)
	acquire := func() error {
		select {
		case inFlight <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := r.rateFloor(k.Tenant); err != nil {
			<-inFlight
			return err
		}
		return nil
	}
	var renewErr error
	renewed := r.clock.Now()
	// The lease is renewed and the reads started from this goroutine only;
	// after a stop no new read starts and those in flight finish.
	for i, pr := range cands {
		if stopped() {
			break
		}
		if r.clock.Now().Sub(renewed) > r.store.TTL()/3 {
			if renewErr = r.store.Renew(ctx, l); renewErr != nil {
				break
			}
			renewed = r.clock.Now()
		}
		if err := acquire(); err != nil {
			stop(fmt.Errorf("%s: %w", k, err))
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-inFlight }()
			defer func() {
				// Out of reach of runOne's recover: a panic fails this
				// repository's pass, not the process.
				if p := recover(); p != nil {
					r.log.Error().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", pr.Number).
						Str("stack", string(debug.Stack())).Msgf("resync: reading issue events panicked: %v", p)
					stop(fmt.Errorf("%s: #%d: panic: %v", k, pr.Number, p))
				}
			}()
			m, err := r.triggerTime(r.withRateFloor(ctx, k.Tenant), k, pr)
			if err != nil {
				stop(err)
				return
			}
			reads[i] = read{m: m, ok: true}
		}()
	}
	wg.Wait()
	if renewErr != nil {
		return nil, renewErr
	}
	var joins []missing
	for _, rd := range reads {
		if !rd.ok {
			continue
		}
		m := rd.m
		if bouncedSince(audit, m.pr.Number, m.pr.HeadSHA, m.at) {
			r.log.Debug().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", m.pr.Number).Str("sha", m.pr.HeadSHA).
				Msg("resync: bounced at this head after its trigger was set; waits for a new commit or trigger")
			continue
		}
		joins = append(joins, m)
	}
	// Joins found before a stop are still applied: each carries its own
	// GitHub time, so the queue's order does not depend on the stop.
	sort.SliceStable(joins, func(i, j int) bool {
		if !joins[i].at.Equal(joins[j].at) {
			return joins[i].at.Before(joins[j].at)
		}
		return joins[i].pr.Number < joins[j].pr.Number
	})
	var fixes []leasedo.Fix
	for _, m := range joins {
		rank, name := policy.PriorityOf(r.syncer.policies.Get(k).Config.PriorityLabels, m.pr.Labels)
		d := leasedo.Details{Sha: m.pr.HeadSHA, Base: m.pr.BaseRef, QueuedAt: m.at.UnixMilli(),
			MergeMethod: m.pr.AutoMergeMethod, Priority: &rank, PriorityName: name,
			Reason: "resync: eligible on GitHub but not queued (" + m.source + ")"}
		held := r.forkUnconsented(k, m.pr)
		if held {
			d.Consent = leasedo.ConsentPending
		}
		res, err := r.store.Join(ctx, l, m.pr.Number, d)
		if err != nil {
			return fixes, err
		}
		if res == leasedo.ResultJoined && held {
			if _, err := r.store.SetConsent(ctx, l, m.pr.Number, leasedo.NoConsent, forkResyncNote); err != nil {
				return fixes, err
			}
		}
		if res == leasedo.ResultJoined {
			fixes = append(fixes, leasedo.Fix{Fix: FixJoined, PRNumber: m.pr.Number, PRSha: m.pr.HeadSHA,
				Detail: m.source + " at " + m.at.UTC().Format(time.RFC3339)})
			if opts := r.optionsOf(k); opts.LabelRequiresWrite && m.labeledBy != "" && !(opts.AutoMergeTrigger && m.pr.AutoMerge) {
				// Who added the label is checked by the sync that follows.
				if err := r.store.AddCommand(ctx, l, leasedo.Command{PRNumber: m.pr.Number, Author: m.labeledBy, Command: "label"}); err != nil {
					return fixes, err
				}
			}
		}
	}
	return fixes, stopErr
}

// triggerTime finds when pr became eligible on GitHub: the earliest of its
// active triggers' latest enabling events. Without any event (history not
// available) it falls back to the PR's creation time. A rate-limit error is
// returned; other API errors fall back too, so one bad PR does not block
// the rest.
func (r *Reconciler) triggerTime(ctx context.Context, k leasedo.Key, pr forge.PR) (missing, error) {
	opts := r.optionsOf(k)
	trigger := opts.TriggerOf(pr.Labels)
	label := trigger != ""
	auto := opts.AutoMergeTrigger && pr.AutoMerge
	m := missing{pr: pr}
	tt, err := r.forge.TriggerTimes(ctx, k.Tenant, k.Repo, pr.Number, trigger)
	if err != nil {
		if _, ok := forge.IsRateLimited(err); ok || ctx.Err() != nil {
			return m, err
		}
		r.log.Warn().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", pr.Number).
			Msg("resync: reading issue events failed; ordering by creation time")
	}
	if label && !tt.LabeledAt.IsZero() {
		m.at, m.source, m.labeledBy = tt.LabeledAt, fmt.Sprintf("label %q", trigger), tt.LabeledBy
	}
	if auto && !tt.AutoMergeAt.IsZero() && (m.at.IsZero() || tt.AutoMergeAt.Before(m.at)) {
		m.at, m.source = tt.AutoMergeAt, "auto-merge"
	}
	if m.at.IsZero() {
		m.at, m.source = pr.CreatedAt, "no trigger event; created"
	}
	if m.at.IsZero() {
		m.at, m.source = r.clock.Now(), "no trigger event"
	}
	return m, nil
}

// bouncedSince reports whether pr was bounced at sha after at: its trigger
// is older than the bounce, so nobody asked again (mergegate removes the
// label on a bounce; this covers a removal that failed).
func bouncedSince(audit []leasedo.AuditEntry, pr int, sha string, at time.Time) bool {
	for _, a := range audit {
		if a.Action == leasedo.AuditBounce && a.PRNumber == pr && a.PRSha == sha && a.TS >= at.UnixMilli() {
			return true
		}
	}
	return false
}

// recent reports whether it joined or was reevaluated within the grace.
func (r *Reconciler) recent(it leasedo.Item, now time.Time) bool {
	if r.grace < 0 {
		return false
	}
	last := it.QueuedAt
	if it.ReevaluatedAt != nil && *it.ReevaluatedAt > last {
		last = *it.ReevaluatedAt
	}
	return now.UnixMilli()-last < r.grace.Milliseconds()
}

// ineligibility applies the eligibility rule (docs/queue.md) to a PR as
// the API lists it, under k's policy.
func (r *Reconciler) ineligibility(k leasedo.Key, pr forge.PR) string {
	return rules.Ineligibility(rules.Eligibility{State: pr.State, Draft: pr.Draft, Base: pr.BaseRef, Labels: pr.Labels, AutoMerge: pr.AutoMerge}, r.optionsOf(k))
}

// optionsOf are k's triggers: its policy file's over the flags.
func (r *Reconciler) optionsOf(k leasedo.Key) rules.Options {
	if r.syncer == nil || r.syncer.policies == nil {
		return r.opts
	}
	return r.syncer.policies.Get(k).Options()
}

// takePriority gives a queued entry the priority its labels give now
// (priority_labels); a priority set by a command is kept while the
// labels give none.
func (r *Reconciler) takePriority(ctx context.Context, l *leasedo.Lease, it leasedo.Item, pr forge.PR) error {
	rank, name := policy.PriorityOf(r.syncer.policies.Get(l.Key).Config.PriorityLabels, pr.Labels)
	if rank == it.Priority && name == it.PriorityName {
		return nil
	}
	if name == "" && it.PriorityName != "" && (it.Priority >= policy.PriorityHigh || it.Priority <= policy.PriorityLow) {
		return nil // set by @mergegate priority
	}
	_, err := r.store.SetPriority(ctx, l, it.PRNumber, rank, name)
	return err
}

// forkUnconsented reports whether pr, found eligible but not queued, joins
// held for a writer's consent: its head is a fork's, which anyone the
// fork's owner lets in may have pushed after a writer's label, and the
// label's time says nothing of the head's. GitHub's auto-merge is
// different: GitHub disables it when someone who may not write pushes, so
// a pull request it triggers has a head a writer consented to.
func (r *Reconciler) forkUnconsented(k leasedo.Key, pr forge.PR) bool {
	return pr.Fork && !(r.optionsOf(k).AutoMergeTrigger && pr.AutoMerge)
}

// forkResyncNote is why a fork's pull request the resync queued is held.
const forkResyncNote = "mergegate found it labelled without having seen it queued (a delivery was lost, or its database), " +
	"and cannot tell whether this head of its fork was pushed before or after the label"
