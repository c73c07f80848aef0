package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

// permissionTTL is how long a user's permission on a repository is kept:
// commands come in bursts from the same people.
const permissionTTL = 10 * time.Minute

// toldTTL: a user replied to once is not replied to again for this long,
// in any repository of the installation; a "confused" reaction on the
// comment answers instead, toldReactions times at most, and then nothing
// (a reaction is a write too: 150 comments by a stranger must not spend
// 150 of the installation's writes). Kept in memory (Syncer.told): a
// restart, or each replica, may reply once more, which still bounds the
// writes for one user at 1 + toldReactions an hour per process, and needs
// no schema change.
const toldTTL = time.Hour

// toldReactions bounds the reactions to one user's refused commands
// within toldTTL of the reply.
const toldReactions = 10

// toldCap bounds Syncer.told: past it, entries older than toldTTL go.
const toldCap = 10000

// runCommands carries out k's "@mergegate ..." commands, oldest first,
// before the queue moves: only from users who may write to the
// repository (GitHub's collaborator permission, kept permissionTTL).
// Each command is answered with a reaction, or a reply when refused, and
// recorded in the audit log. An error from GitHub leaves the command for
// the next sync.
func (s *Syncer) runCommands(ctx context.Context, l *leasedo.Lease) error {
	seen := map[int64]bool{} // comments whose command ran in this pass
	for {
		n, err := s.runSomeCommands(ctx, l, seen)
		if err != nil || n < commandBatch {
			return err
		}
	}
}

// commandBatch is how many commands the store hands out at once
// (leasedo's Commands).
const commandBatch = 50

// runSomeCommands carries out the next commandBatch commands at most and
// says how many it read.
func (s *Syncer) runSomeCommands(ctx context.Context, l *leasedo.Lease, seen map[int64]bool) (int, error) {
	k := l.Key
	cmds, err := s.store.Commands(ctx, k)
	if err != nil || len(cmds) == 0 {
		return 0, err
	}
	for _, c := range cmds {
		if c.CommentID != 0 && seen[c.CommentID] {
			// Stored before mergegate read one command per comment.
			if err := s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+": ignored: a comment carries one command"); err != nil {
				return 0, err
			}
			continue
		}
		seen[c.CommentID] = true
		err := s.runCommand(ctx, l, c)
		if _, limited := forge.IsRateLimited(err); err == nil || limited || forge.IsTransient(err) || ctx.Err() != nil || errors.Is(err, leasedo.ErrLeaseLost) {
			if err != nil {
				return 0, err // tried again at the next sync
			}
			continue
		}
		// GitHub refused it for good (a pull request gone, a permission
		// the App lacks): said once, and the queue goes on.
		s.log.Error().Err(err).Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", c.PRNumber).Str("command", c.Command).
			Msg("command dropped: GitHub refused what it needs (operator: check the App's permissions)")
		if err := s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+": failed: "+err.Error()); err != nil {
			return 0, err
		}
	}
	return len(cmds), nil
}

func (s *Syncer) runCommand(ctx context.Context, l *leasedo.Lease, c leasedo.Command) error {
	k := l.Key
	log := s.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", c.PRNumber).Str("by", c.Author).Str("command", c.Command).Logger()
	if c.Command == webhook.HeadMoveCommand {
		return s.headMoved(ctx, l, c)
	}
	if c.Command == "label" {
		// A trigger label mergegate added itself (@mergegate queue, from
		// someone who may write) carries that command's consent: the
		// bot's own permission, whatever GitHub answers for it, is not
		// what counts.
		own, err := s.isApp(ctx, c.Author)
		switch {
		case err != nil && (forge.IsRetryable(err) || ctx.Err() != nil):
			return err
		case err != nil:
			// Not known to be mergegate's: checked as anyone's label.
			log.Warn().Err(err).Msg("could not read the App's own login (GET /app); the label is checked as anyone's")
		case own:
			return s.store.CommandDone(ctx, l, c, "trigger label added by mergegate (@"+c.Author+") for a command from someone who may write")
		}
	}
	perm, err := s.permission(ctx, k, c.Author)
	if err != nil {
		return err
	}
	if c.Command == "label" {
		return s.checkLabel(ctx, l, c, perm)
	}
	if !perm.CanWrite() {
		log.Info().Str("permission", perm.Role).Msg("command refused: the author may not write to the repository")
		return s.refuse(ctx, l, c, fmt.Sprintf("@%s: only people who can write to this repository can give mergegate commands (your role here is %s).",
			c.Author, roleName(perm)), "refused: @"+c.Author+" may not write to the repository")
	}
	pol := s.policies.Get(k)
	switch c.Command {
	case "queue":
		pr, err := s.gh.GetPR(ctx, k.Tenant, k.Repo, c.PRNumber)
		if err != nil {
			return err
		}
		opts := pol.Options()
		if why := rules.Ineligibility(rules.Eligibility{State: pr.State, Draft: pr.Draft, Base: pr.BaseRef, AutoMerge: true}, withAutoMerge(opts)); why != "" {
			return s.refuse(ctx, l, c, fmt.Sprintf("@%s: mergegate cannot queue this pull request: %s.", c.Author, why), "refused: "+why)
		}
		entry, err := s.entryOf(ctx, k, c.PRNumber)
		if err != nil {
			return err
		}
		var made time.Time
		if c.CreatedAt > 0 {
			made = time.UnixMilli(c.CreatedAt)
		}
		seen, err := s.headSeen(ctx, k, entry, c, pr.HeadSHA, made)
		if err != nil {
			return err
		}
		if !rules.QueueConsents(entry, pr.HeadSHA, seen, made, s.clock.Now()) {
			return s.refuse(ctx, l, c, fmt.Sprintf("@%s: this pull request's head is now %s, and mergegate cannot tell that it was pushed before you wrote this comment: "+
				"if you have seen that commit, comment `@mergegate queue` again to queue it.", c.Author, forge.ShortSHA(pr.HeadSHA)),
				"refused: the head "+forge.ShortSHA(pr.HeadSHA)+" may have been pushed after @"+c.Author+"'s comment")
		}
		// The trigger label, as if added by hand: the queue's own rule
		// (eligible while labelled) keeps it, and cancel removes it.
		if labels := opts.Labels(); len(labels) > 0 && opts.TriggerOf(pr.Labels) == "" {
			if err := s.gh.AddLabel(ctx, k.Tenant, k.Repo, c.PRNumber, labels[0]); err != nil {
				return err
			}
		}
		rank, name := policy.PriorityOf(pol.Config.PriorityLabels, pr.Labels)
		// A writer's consent, for a head they could have seen
		// (rules.QueueConsents; queued already: it covers this head now).
		if _, err := s.store.Join(ctx, l, c.PRNumber, leasedo.Details{Sha: pr.HeadSHA, Base: pr.BaseRef, Priority: &rank, PriorityName: name,
			Reason: "@" + c.Author + ": @mergegate queue", Consent: leasedo.ConsentGiven}); err != nil {
			return err
		}
	case "cancel":
		for _, label := range pol.Options().Labels() {
			if err := s.gh.RemoveLabel(ctx, k.Tenant, k.Repo, c.PRNumber, label); err != nil {
				return err
			}
		}
		if err := s.store.Leave(ctx, l, c.PRNumber, "cancelled by @"+c.Author); err != nil {
			return err
		}
	case "refresh":
		if _, err := s.policies.Refresh(ctx, k, true); err != nil {
			return err
		}
		s.forgetRepo(k)
		if _, err := s.store.Recheck(ctx, l, leasedo.StatusEvaluating, leasedo.StatusGatePassed, leasedo.StatusBlocked); err != nil {
			return err
		}
	case "priority":
		rank, name := map[string]int{"high": policy.PriorityHigh, "normal": policy.PriorityNormal, "low": policy.PriorityLow}[c.Arg], c.Arg
		if c.Arg == "normal" {
			name = ""
		}
		if _, err := s.store.SetPriority(ctx, l, c.PRNumber, rank, name); err != nil {
			return err
		}
	default:
		return s.refuse(ctx, l, c, fmt.Sprintf("@%s: mergegate did not understand %q. It knows `@mergegate queue`, `@mergegate cancel`, `@mergegate refresh` and `@mergegate priority high|normal|low`.",
			c.Author, c.Arg), "refused: not a command")
	}
	log.Info().Str("arg", c.Arg).Msg("command carried out")
	if c.CommentID != 0 {
		if err := s.gh.React(ctx, k.Tenant, k.Repo, c.CommentID, "+1"); err != nil && !forge.IsNotFound(err) {
			return err
		}
	}
	return s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+" "+c.Arg)
}

// headMoved: c.Author moved a queued pull request's head (pushed, reopened
// it, marked it ready, changed its base). A writer's consent moves along
// only when they may write, or are mergegate itself (a branch it
// updated); anyone else's move leaves the pull request held until a writer
// consents again (rules.ConsentAfter). A pull request not queued costs
// no read: its head is kept a while (Store.SeeHead).
func (s *Syncer) headMoved(ctx context.Context, l *leasedo.Lease, c leasedo.Command) error {
	k := l.Key
	kind, before, after, ok := webhook.ParseHeadMove(c.Arg)
	if !ok {
		return s.store.CommandDone(ctx, l, c, "@"+c.Author+": head moved: unreadable")
	}
	e, err := s.entryOf(ctx, k, c.PRNumber)
	if err != nil {
		return err
	}
	if e == nil {
		// Not queued: kept a while, unread, for a writer's
		// `@mergegate queue` written before it and carried out after
		// (headSeen).
		return s.store.SeeHead(ctx, l, c, after)
	}
	it := *e
	m := rules.HeadMove{Kind: kind, Before: before, After: after, By: c.Author}
	if m.Trusted, err = s.trusted(ctx, k, c.Author); err != nil {
		return err
	}
	consent, note, changed := rules.ConsentAfter(it, m)
	if changed {
		if _, err := s.store.SetConsent(ctx, l, c.PRNumber, consent, note); err != nil {
			return err
		}
	}
	outcome := "@" + c.Author + " (" + kind + ", " + forge.ShortSHA(after) + "): "
	switch {
	case m.Trusted && consent == after:
		outcome += "the consent covers the new head"
	case m.Trusted:
		outcome += "may write, but the consent did not cover " + forge.ShortSHA(before) + ": a writer must consent again"
	default:
		outcome += "may not write to the repository: held until a writer consents again"
		s.prLog(k, c.PRNumber, after).Info().Str("by", c.Author).Str("move", kind).
			Msg("moved by someone who may not write to the repository: it waits for a writer's @mergegate queue or label before it merges or joins a merge train group")
	}
	return s.store.CommandDone(ctx, l, c, outcome)
}

// headSeen is what rules.QueueConsents needs of head, the head of a pull
// request not queued (entry nil) when c, a writer's command written at
// made, is carried out: when mergegate learnt of it, and, only when that
// was after the comment and someone else moved it, whether they may write
// (one read, cached). nil: nothing is kept of it.
func (s *Syncer) headSeen(ctx context.Context, k leasedo.Key, entry *leasedo.Item, c leasedo.Command, head string, made time.Time) (*rules.Seen, error) {
	if entry != nil || made.IsZero() {
		return nil, nil
	}
	h, ok, err := s.store.HeadSeenOf(ctx, k, c.PRNumber, head)
	if err != nil || !ok {
		return nil, err
	}
	seen := &rules.Seen{At: time.UnixMilli(h.At), Trusted: h.By == c.Author}
	if seen.Trusted || rules.KnownBefore(seen.At, made) {
		return seen, nil
	}
	seen.Trusted, err = s.trusted(ctx, k, h.By)
	return seen, err
}

// trusted reports whether a head moved by login carries a writer's
// consent along: login is mergegate itself (a branch it updated) or may
// write to the repository (its permission, read once and cached). A
// login GitHub's GET /app does not settle is checked as anyone's.
func (s *Syncer) trusted(ctx context.Context, k leasedo.Key, login string) (bool, error) {
	own, err := s.isApp(ctx, login)
	if err != nil && (forge.IsRetryable(err) || ctx.Err() != nil) {
		return false, err
	}
	if own {
		return true, nil
	}
	perm, err := s.permission(ctx, k, login)
	if err != nil {
		return false, err
	}
	return perm.CanWrite(), nil
}

// refuse replies to a refused command and records it: one reply per
// comment, and none to a user replied to within toldTTL, whose comment
// gets a "confused" reaction instead (toldReactions at most, then
// nothing).
func (s *Syncer) refuse(ctx context.Context, l *leasedo.Lease, c leasedo.Command, reply, outcome string) error {
	k := l.Key
	switch s.toldRecently(k.Tenant, c.Author) {
	case toldReact:
		if c.CommentID != 0 {
			if err := s.gh.React(ctx, k.Tenant, k.Repo, c.CommentID, "confused"); err != nil && !forge.IsNotFound(err) {
				return err
			}
			s.markReacted(k.Tenant, c.Author)
		}
		return s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+": "+outcome+" (not replied: told within the hour)")
	case toldSilent:
		return s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+": "+outcome+" (not answered: told within the hour, and reacted to enough)")
	}
	if err := s.gh.Comment(ctx, k.Tenant, k.Repo, c.PRNumber, reply); err != nil && !forge.IsNotFound(err) {
		return err
	}
	s.markTold(k.Tenant, c.Author)
	return s.store.CommandDone(ctx, l, c, "@"+c.Author+": @mergegate "+c.Command+": "+outcome)
}

// told is what Syncer.told keeps of a user replied to.
type told struct {
	at      time.Time // the reply
	reacted int       // reactions since
}

// What a refused command of a user gets (toldRecently).
const (
	toldReply  = iota // a reply: not told within toldTTL
	toldReact         // a reaction
	toldSilent        // nothing more
)

// toldRecently says what a refused command of user of tenant gets now.
func (s *Syncer) toldRecently(tenant, user string) int {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.told[tenant+"@"+strings.ToLower(user)]
	switch age := now.Sub(t.at); {
	case !ok || age < 0 || age >= toldTTL:
		return toldReply
	case t.reacted < toldReactions:
		return toldReact
	}
	return toldSilent
}

func (s *Syncer) markTold(tenant, user string) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.told == nil {
		s.told = map[string]told{}
	}
	if len(s.told) >= toldCap {
		maps.DeleteFunc(s.told, func(_ string, t told) bool { return now.Sub(t.at) >= toldTTL || now.Before(t.at) })
	}
	s.told[tenant+"@"+strings.ToLower(user)] = told{at: now}
}

func (s *Syncer) markReacted(tenant, user string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := tenant + "@" + strings.ToLower(user)
	if t, ok := s.told[key]; ok {
		t.reacted++
		s.told[key] = t
	}
}

// checkLabel: under label_requires_write, a trigger label added by someone
// who may not write to the repository (the Triage role may add labels)
// does not queue the pull request: it leaves, the label is removed, and
// they are told why.
func (s *Syncer) checkLabel(ctx context.Context, l *leasedo.Lease, c leasedo.Command, perm forge.Permission) error {
	if perm.CanWrite() {
		return s.store.CommandDone(ctx, l, c, "trigger label added by @"+c.Author+", who may write")
	}
	k := l.Key
	for _, label := range s.policies.Get(k).Options().Labels() {
		if err := s.gh.RemoveLabel(ctx, k.Tenant, k.Repo, c.PRNumber, label); err != nil {
			return err
		}
	}
	if err := s.store.Leave(ctx, l, c.PRNumber, "the trigger label was added by @"+c.Author+", who may not write to the repository (label_requires_write)"); err != nil {
		return err
	}
	s.log.Info().Str("tenant", k.Tenant).Str("repo", k.Repo).Int("pr", c.PRNumber).Str("by", c.Author).Msg("trigger label refused: its author may not write to the repository (label_requires_write)")
	return s.refuse(ctx, l, c, fmt.Sprintf("@%s: this repository queues pull requests only when someone who can write to it adds the label (your role here is %s); the label was removed.",
		c.Author, roleName(perm)), "label refused")
}

func roleName(p forge.Permission) string {
	if p.Role != "" {
		return p.Role
	}
	return p.Permission
}

// withAutoMerge: queue by command ignores the triggers (the command is the
// trigger) but keeps the other rules (open, not a draft, a base with a
// queue).
func withAutoMerge(o rules.Options) rules.Options {
	o.AutoMergeTrigger = true
	return o
}

// appLoginTTL is how long the App's login is kept (a renamed App gets a
// new slug).
const appLoginTTL = time.Hour

// isApp reports whether login is the App's own, "<slug>[bot]" (GitHub's
// logins compare case-insensitively). Only a login ending in "[bot]" costs
// a read of the App's slug (GET /app, kept appLoginTTL).
func (s *Syncer) isApp(ctx context.Context, login string) (bool, error) {
	if !strings.HasSuffix(strings.ToLower(login), "[bot]") {
		return false, nil
	}
	s.mu.Lock()
	if s.logins == nil {
		s.logins = map[string]cached[string]{}
	}
	s.mu.Unlock()
	own, err := readThrough(s, s.logins, "app", appLoginTTL, func() (string, error) { return s.gh.AppLogin(ctx) })
	if err != nil {
		return false, err
	}
	return strings.EqualFold(own, login), nil
}

// permission returns user's permission on k, kept permissionTTL.
func (s *Syncer) permission(ctx context.Context, k leasedo.Key, user string) (forge.Permission, error) {
	return readThrough(s, s.perms, k.String()+"@"+user, permissionTTL, func() (forge.Permission, error) {
		return s.gh.UserPermission(ctx, k.Tenant, k.Repo, user)
	})
}

// forgetRepo drops what the Syncer keeps of k (rules, methods): refresh.
func (s *Syncer) forgetRepo(k leasedo.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.methods, k.String())
	repo := k.String() + "@"
	maps.DeleteFunc(s.rules, func(key string, _ cached[forge.Required]) bool { return strings.HasPrefix(key, repo) })
	maps.DeleteFunc(s.perms, func(key string, _ cached[forge.Permission]) bool { return strings.HasPrefix(key, repo) })
}

// entryOf is k's live queue entry for pull request pr, nil when it has none.
func (s *Syncer) entryOf(ctx context.Context, k leasedo.Key, pr int) (*leasedo.Item, error) {
	items, err := s.store.Items(ctx, k)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(items, func(it leasedo.Item) bool { return it.PRNumber == pr && it.Status != leasedo.StatusBounced })
	if i < 0 {
		return nil, nil
	}
	return &items[i], nil
}
