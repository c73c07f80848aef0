package reconcile

import (
	"context"
	"encoding/json"
	"errors"
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

// Policies keeps each repository's effective policy: its
// .github/mergegate.yml (or its organisation's <owner>/.github one) over
// the operator's flags. It is loaded from the store at start, read from
// GitHub when a repository has none yet or a push touched the file (the
// store's stale mark), on each cron pass and on @mergegate refresh; reads
// are conditional (ETags), so an unchanged file costs no rate-limit
// point. A file with problems never replaces the last good policy: its
// problems are kept beside it for the check runs and the dashboard, and
// logged once per change of the file. Safe for concurrent use.
type Policies struct {
	store    *leasedo.Store
	gh       *forge.Client
	defaults rules.Policy
	log      zerolog.Logger
	clock    leasedo.Clock

	mu      sync.Mutex
	m       map[leasedo.Key]loaded
	freezes map[leasedo.Key][]leasedo.Freeze
	orgs    map[string]orgRead // tenant:owner
}

// loaded is a repository's policy, the text of the file in force and
// when GitHub was last asked.
type loaded struct {
	e       policy.Effective
	content string
	readAt  time.Time
}

// orgRead is an organisation's .github/mergegate.yml as last read.
type orgRead struct {
	f     forge.File
	found bool
	at    time.Time
}

// A read of a file that is not there always costs a rate-limit point:
// forge's ETag cache keeps only 200 answers, so a 404 is never asked
// conditionally (and GitHub documents ETags for conditional requests, not
// for 404s). A repository without a file (and an organisation without
// one) is asked again at most this often by the cron; a push that adds
// the file marks it to be read at once.
const (
	absentRecheck = time.Hour
	// orgReuse: one cron pass reads an organisation's file once for all
	// its repositories.
	orgReuse = time.Minute
)

// NewPolicies returns the policies of the repositories of store, under
// defaults (the flags); gh nil: defaults only.
func NewPolicies(store *leasedo.Store, gh *forge.Client, defaults rules.Policy, clock leasedo.Clock, log zerolog.Logger) *Policies {
	defaults.Triggers.For = nil
	if clock == nil {
		clock = leasedo.SystemClock{}
	}
	return &Policies{store: store, gh: gh, defaults: defaults, log: log, clock: clock,
		m: map[leasedo.Key]loaded{}, orgs: map[string]orgRead{}}
}

// Defaults is the policy of a repository without a file.
func (p *Policies) Defaults() rules.Policy { return p.defaults }

// Load reads every stored policy into memory (at start): the webhook path
// then knows each repository's triggers before GitHub is asked again.
func (p *Policies) Load(ctx context.Context) error {
	all, err := p.store.Policies(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	for _, sp := range all {
		p.m[sp.Key] = loaded{e: p.fromStored(sp), content: sp.Content, readAt: time.UnixMilli(sp.ReadAt)}
	}
	p.mu.Unlock()
	return p.loadAllFreezes(ctx)
}

func (p *Policies) loadAllFreezes(ctx context.Context) error {
	tracked, err := p.store.Tracked(ctx)
	if err != nil {
		return err
	}
	for _, t := range tracked {
		if err := p.LoadFreezes(ctx, t.Key); err != nil {
			return err
		}
	}
	return nil
}

// fromStored parses a stored policy again. It was good when stored, but
// a version of mergegate with tighter bounds may refuse it (a
// blocking_title over 1 KiB): then it is not in force, its problems are
// shown at once, and its sha is forgotten so that the next read of the
// file parses it and logs them, as for any bad file.
func (p *Policies) fromStored(sp leasedo.StoredPolicy) policy.Effective {
	e := policy.Effective{Source: sp.Source, File: sp.File, SHA: sp.SHA, BadSHA: sp.BadSHA, Defaults: p.defaults}
	if sp.Problems != "" {
		_ = json.Unmarshal([]byte(sp.Problems), &e.Problems)
	}
	if sp.Content != "" {
		f, ps := policy.Parse(sp.File, []byte(sp.Content))
		if len(ps) == 0 {
			e.Config = f
		} else if len(e.Problems) == 0 {
			e.SHA, e.Problems = "", ps
		}
	}
	return e
}

// Get returns k's effective policy from memory (the defaults when it has
// not been read). It never calls GitHub.
func (p *Policies) Get(k leasedo.Key) policy.Effective {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := p.m[k]; ok {
		return l.e
	}
	return policy.Defaults(p.defaults)
}

// Options are the triggers of (tenant, repo), from memory: the webhook
// translator's rules.Options.For.
func (p *Policies) Options(tenant, repo string) rules.Options {
	return p.Get(leasedo.Key{Tenant: tenant, Repo: repo}).Options()
}

// Ensure returns k's policy, reading it from GitHub first when it has
// never been read or a push touched the file since (marks, read by the
// sync in one query with the commands waiting).
func (p *Policies) Ensure(ctx context.Context, k leasedo.Key, marks leasedo.SyncMarks) (policy.Effective, error) {
	p.mu.Lock()
	_, known := p.m[k]
	p.mu.Unlock()
	if known && marks.PolicyStored && !marks.PolicyStale {
		return p.Get(k), nil
	}
	return p.Refresh(ctx, k, true)
}

// Refresh reads k's policy file from GitHub: the repository's own, else
// its organisation's, else none (the defaults). Without force (the cron's
// pass) a repository known to have no file of its own is asked again
// only every absentRecheck, and an organisation's file is read once per
// pass. An error reading it (GitHub down, a rate limit) keeps the policy
// in force and is returned.
func (p *Policies) Refresh(ctx context.Context, k leasedo.Key, force bool) (policy.Effective, error) {
	p.mu.Lock()
	was, known := p.m[k]
	p.mu.Unlock()
	cur := p.Get(k)
	if p.gh == nil {
		return cur, nil
	}
	if !force {
		sp, ok, err := p.store.Policy(ctx, k)
		if err != nil {
			return cur, err
		}
		force = ok && sp.Stale // a push touched the file: read it whatever the hour
	}
	now := p.clock.Now()
	var (
		f      forge.File
		found  bool
		err    error
		source = policy.SourceRepo
	)
	ownFile := cur.Source == policy.SourceRepo || (cur.BadSHA != "" && strings.HasPrefix(cur.Problems[0].File, k.Repo+":"))
	// tooLarge: the file is there, too large to read (forge's
	// ErrFileTooLarge): a problem of the file like any other.
	var tooLarge error
	if !force && known && !ownFile && now.Sub(was.readAt) < absentRecheck {
		// No file of its own an hour ago: only the organisation's may
		// have changed.
	} else if f, found, err = p.gh.RepoFile(ctx, k.Tenant, k.Repo, policy.Path); errors.Is(err, forge.ErrFileTooLarge) && f.SHA != "" {
		tooLarge = err
	} else if err != nil {
		return cur, err
	}
	if !found && !strings.HasSuffix(k.Repo, "/.github") {
		source = policy.SourceOrg
		if f, found, err = p.orgFile(ctx, k, force, now); errors.Is(err, forge.ErrFileTooLarge) && f.SHA != "" {
			tooLarge = err
		} else if err != nil {
			return cur, err
		}
	}
	log := p.log.With().Str("tenant", k.Tenant).Str("repo", k.Repo).Logger()
	next := cur
	next.Defaults = p.defaults
	content := was.content
	sp := leasedo.StoredPolicy{Key: k}
	switch {
	case !found:
		next, content = policy.Defaults(p.defaults), ""
		if cur.Source != policy.SourceDefaults {
			log.Info().Str("was", cur.File).Msg("no .github/mergegate.yml in the repository nor in its organisation's .github repository: the queue runs on the defaults (the flags)")
		}
	default:
		name := f.Repo + ":" + f.Path
		switch {
		case f.SHA == cur.SHA && len(cur.Problems) == 0 && cur.File == name:
			// Unchanged (a 304).
		case f.SHA == cur.BadSHA && len(cur.Problems) > 0:
			// The same bad file: said already.
		default:
			var file policy.File
			var problems policy.Problems
			if tooLarge != nil {
				problems = policy.Problems{{File: name, Msg: fmt.Sprintf("the file is %s bytes: mergegate reads a policy file of at most %s bytes (256 KiB); "+
					"a policy is a few lines, make it smaller", thousands(f.Size), thousands(forge.MaxFileSize))}}
			} else {
				file, problems = policy.Parse(name, f.Content)
			}
			if len(problems) > 0 {
				next.Problems, next.BadSHA = problems, f.SHA
				log.Warn().Str("file", name).Str("blob_sha", forge.ShortSHA(f.SHA)).Int("problems", len(problems)).
					Str("problem", problems[0].String()).Str("in_force", inForce(cur)).
					Msg("the repository's policy file has problems: mergegate keeps the policy in force until the file is fixed; its check runs and the dashboard say where")
			} else {
				next = policy.Effective{Source: source, File: name, SHA: f.SHA, Config: file, Defaults: p.defaults}
				content = string(f.Content)
				log.Info().Str("file", name).Str("blob_sha", forge.ShortSHA(f.SHA)).Str("source", source).Msg("policy read")
			}
		}
	}
	sp.Content = content
	sp.Source, sp.File, sp.SHA, sp.BadSHA = next.Source, next.File, next.SHA, next.BadSHA
	if len(next.Problems) > 0 {
		b, _ := json.Marshal(next.Problems)
		sp.Problems = string(b)
	}
	if err := p.store.SavePolicy(ctx, sp); err != nil {
		return cur, err
	}
	p.mu.Lock()
	p.m[k] = loaded{e: next, content: content, readAt: now}
	p.mu.Unlock()
	return next, nil
}

// orgFile reads k's organisation's file, once per pass for all its
// repositories (and, when it has none, once an hour unless forced).
func (p *Policies) orgFile(ctx context.Context, k leasedo.Key, force bool, now time.Time) (forge.File, bool, error) {
	org := policy.OrgRepo(k.Repo)
	key := k.Tenant + ":" + org
	p.mu.Lock()
	last, ok := p.orgs[key]
	p.mu.Unlock()
	if ok && !force && (now.Sub(last.at) < orgReuse || (!last.found && now.Sub(last.at) < absentRecheck)) {
		return last.f, last.found, nil
	}
	f, found, err := p.gh.RepoFile(ctx, k.Tenant, org, policy.Path)
	if err != nil {
		return f, found, err
	}
	p.mu.Lock()
	p.orgs[key] = orgRead{f: f, found: found, at: now}
	p.mu.Unlock()
	return f, found, nil
}

// thousands writes n with a comma every three digits (1,048,586).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func inForce(e policy.Effective) string {
	if e.Source == policy.SourceDefaults || e.File == "" {
		return "the defaults"
	}
	return e.File + " at " + forge.ShortSHA(e.SHA)
}

// policyOf is the rules.Policy of k's base branch: its policy file over
// the flags, with the admin API's freezes over both. From memory.
func (s *Syncer) policyOf(k leasedo.Key, base string) rules.Policy {
	p := s.policies.Get(k).For(base)
	if f, ok := s.policies.frozen(k, base); ok && !p.Frozen {
		p.Frozen, p.FreezeMessage = true, f.Message
	} else if ok {
		p.FreezeMessage = f.Message
	}
	return p
}

// Policies returns the Syncer's repository policies (the admin API, the
// dashboard and the webhook translator read them).
func (s *Syncer) Policies() *Policies { return s.policies }

// commitMessage renders the merge commit's templates from the pull
// request (read before merging when templates are set); {co_authors}
// reads its commits: every other author, and their own Co-authored-by
// trailers, as "Co-authored-by: Name <email>" lines (Kodiak's and
// bulldozer's form). Failing that read, the message goes without them.
func (s *Syncer) commitMessage(ctx context.Context, k leasedo.Key, p rules.Policy, pr *forge.PR) forge.CommitMessage {
	if pr == nil || (p.CommitTitle == "" && p.CommitMessage == "") {
		return forge.CommitMessage{}
	}
	info := policy.CommitInfo{Number: pr.Number, Title: pr.Title, Body: pr.Body, Author: pr.Author}
	if strings.Contains(p.CommitTitle+p.CommitMessage, "{co_authors}") {
		authors, err := s.gh.PRCommitAuthors(ctx, k.Tenant, k.Repo, pr.Number)
		if err != nil {
			s.prLog(k, pr.Number, pr.HeadSHA).Warn().Err(err).Msg("could not list the commits' authors; merging without co-authors")
		}
		info.CoAuthors = coAuthors(pr.Author, authors)
	}
	return forge.CommitMessage{Title: policy.Render(p.CommitTitle, info), Message: policy.Render(p.CommitMessage, info)}
}

// coAuthors are the commits' authors but the pull request's, and their
// trailers, each once, in order.
func coAuthors(prAuthor string, authors []forge.CommitAuthor) []string {
	seen := map[string]bool{}
	var out []string
	add := func(line string) {
		if key := strings.ToLower(line); !seen[key] {
			seen[key] = true
			out = append(out, line)
		}
	}
	for _, a := range authors {
		if a.Email != "" && !strings.EqualFold(a.Login, prAuthor) {
			add(fmt.Sprintf("Co-authored-by: %s <%s>", a.Name, a.Email))
		}
		for _, t := range a.CoAuthors {
			add("Co-authored-by: " + strings.TrimSpace(t[len("co-authored-by:"):]))
		}
	}
	return out
}

// deleteBranch deletes the merged pull request's head branch, only when
// nothing else needs it and it is the branch that was merged: never a
// fork's, the repository's default branch, a branch classic protection or
// a ruleset covers, a base of an open pull request or of one of
// mergegate's queues, nor a branch whose tip moved since the merge
// (mergedSHA; issue 30: a back-merge from main into develop deleted main).
// GitHub's DELETE takes no expected sha: the tip is read just before it.
// What goes wrong is logged: the merge is done.
func (s *Syncer) deleteBranch(ctx context.Context, k leasedo.Key, pr *forge.PR, mergedSHA string) {
	if pr == nil {
		return
	}
	branch := pr.HeadRef
	log := s.prLog(k, pr.Number, mergedSHA).With().Str("branch", branch).Logger()
	if pr.Fork || branch == "" {
		log.Debug().Msg("branch not deleted: it lives in a fork")
		return
	}
	if why := s.branchNeeded(ctx, k, branch, mergedSHA); why != "" {
		log.Info().Msg("branch kept after the merge: " + why)
		return
	}
	if err := s.gh.DeleteBranch(ctx, k.Tenant, k.Repo, branch); err != nil {
		log.Warn().Err(err).Msg("could not delete the branch after the merge (the App needs contents: write)")
		return
	}
	log.Info().Msg("branch deleted after the merge (delete_branch_after_merge)")
}

// branchNeeded says why branch must not be deleted after its merge at
// mergedSHA, or "" when it may be.
func (s *Syncer) branchNeeded(ctx context.Context, k leasedo.Key, branch, mergedSHA string) string {
	items, err := s.store.Items(ctx, k)
	if err != nil {
		return "could not read the queue (" + err.Error() + ")"
	}
	for _, it := range items {
		if it.BaseRef == branch {
			return fmt.Sprintf("it is the base of mergegate's queue (#%d waits in it)", it.PRNumber)
		}
	}
	open, err := s.gh.ListOpenPRs(ctx, k.Tenant, k.Repo)
	if err != nil {
		return "could not list the open pull requests based on it (" + err.Error() + ")"
	}
	for _, o := range open {
		if o.BaseRef == branch {
			return fmt.Sprintf("open pull request #%d is based on it", o.Number)
		}
	}
	st, err := s.gh.BranchState(ctx, k.Tenant, k.Repo, branch)
	switch {
	case err != nil:
		return "could not read the branch (" + err.Error() + ")"
	case st.SHA == "":
		return "it is already gone"
	case st.Default:
		return "it is the repository's default branch"
	case st.Protected:
		return "branch protection covers it"
	case st.Ruled:
		return "a ruleset applies to it"
	case st.SHA != mergedSHA:
		return "its tip moved since the merge (" + st.SHA + ", merged " + mergedSHA + ")"
	}
	return ""
}

// Freezes, from the admin API, are kept in memory beside the policies
// and written through to the store.

// LoadFreezes reads k's freezes from the store.
func (p *Policies) LoadFreezes(ctx context.Context, k leasedo.Key) error {
	fs, err := p.store.Freezes(ctx, k)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freezes == nil {
		p.freezes = map[leasedo.Key][]leasedo.Freeze{}
	}
	p.freezes[k] = fs
	return nil
}

// Freeze freezes (or, frozen false, thaws) k's queue, or one base
// branch's, with who and why in the audit log.
func (p *Policies) Freeze(ctx context.Context, k leasedo.Key, branch string, frozen bool, message, by string) (bool, error) {
	changed, err := p.store.SetFreeze(ctx, k, branch, frozen, message, by)
	if err != nil {
		return false, err
	}
	return changed, p.LoadFreezes(ctx, k)
}

// Freezes returns k's freezes from the admin API (from memory).
func (p *Policies) Freezes(k leasedo.Key) []leasedo.Freeze {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]leasedo.Freeze(nil), p.freezes[k]...)
}

// frozen returns the freeze that holds base's queue: the branch's own,
// else the repository's.
func (p *Policies) frozen(k leasedo.Key, base string) (leasedo.Freeze, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var repo *leasedo.Freeze
	for i, f := range p.freezes[k] {
		if f.Branch == base && base != "" {
			return f, true
		}
		if f.Branch == "" {
			repo = &p.freezes[k][i]
		}
	}
	if repo != nil {
		return *repo, true
	}
	return leasedo.Freeze{}, false
}
