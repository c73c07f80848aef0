package reconcile

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

// pass runs the cron's pass for repo (resync, then the sync).
func (e *env) pass(repo string) {
	e.t.Helper()
	if _, err := e.r.Pass(e.ctx, e.key(repo)); err != nil {
		e.t.Fatalf("Pass %s: %v", repo, err)
	}
}

// green adds PR n to repo, labelled, with its CI check passed.
func (e *env) green(repo string, n int, labels ...string) fakegithub.PR {
	e.t.Helper()
	pr := e.gh.AddPR(repo, fakegithub.PR{Number: n, Labels: append([]string{"automerge"}, labels...)})
	e.gh.SetCheckRun(repo, pr.HeadSHA, "ci", "completed", "success")
	return pr
}

// settle runs passes until nothing merges any more (the fake needs a read
// after a merge moves the base).
func (e *env) settle(repo string) {
	e.t.Helper()
	for i := 0; i < 6; i++ {
		e.clock.Advance(2 * time.Minute)
		e.pass(repo)
	}
}

func (e *env) lastTitle(sha string) string {
	title := ""
	for _, cr := range e.gh.CheckRuns() {
		if cr.HeadSHA == sha {
			title = cr.Title
		}
	}
	return title
}

// Two repositories under one installation: one squash-only with a
// do-not-merge label, the other with the defaults; each follows its own.
func TestEachRepositoryItsOwnPolicy(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/strict", "main")
	e.gh.AddRepo(tenant, "octo/plain", "main")
	e.gh.SetFile("octo/strict", policy.Path, "merge_method: squash\nblocking_labels: [do-not-merge]\n")
	e.green("octo/strict", 1, "do-not-merge")
	e.green("octo/strict", 2)
	e.green("octo/plain", 1, "do-not-merge")
	e.settle("octo/strict")
	e.settle("octo/plain")

	var strict, plain []fakegithub.Merge
	for _, m := range e.gh.Merges() {
		if m.Repo == "octo/strict" {
			strict = append(strict, m)
		} else {
			plain = append(plain, m)
		}
	}
	if len(strict) != 1 || strict[0].PRNumber != 2 || strict[0].Method != "squash" {
		t.Errorf("octo/strict merged %+v, want #2 only, squashed", strict)
	}
	if len(plain) != 1 || plain[0].Method != "merge" {
		t.Errorf("octo/plain merged %+v, want #1 with merge (the default; its label means nothing there)", plain)
	}
	pr1, _ := e.gh.PR("octo/strict", 1)
	if got := e.lastTitle(pr1.HeadSHA); !strings.Contains(got, `Waits, the label "do-not-merge" keeps it from merging`) {
		t.Errorf("#1's check run = %q", got)
	}
	eff := e.r.syncer.Policies().Get(e.key("octo/strict"))
	if eff.Source != policy.SourceRepo || eff.File != "octo/strict:.github/mergegate.yml" {
		t.Errorf("effective = %+v", eff)
	}
}

// Without a file of its own, the organisation's .github repository's
// applies; the repository's own, once added, wins.
func TestOrganisationFallback(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.AddRepo(tenant, "octo/.github", "main")
	e.gh.SetFile("octo/.github", policy.Path, "merge_method: rebase\n")
	e.green("octo/app", 1)
	e.settle("octo/app")
	if m := e.gh.Merges(); len(m) != 1 || m[0].Method != "rebase" {
		t.Fatalf("merges = %+v, want a rebase (the organisation's)", m)
	}
	if eff := e.r.syncer.Policies().Get(e.key("octo/app")); eff.Source != policy.SourceOrg || eff.File != "octo/.github:.github/mergegate.yml" {
		t.Errorf("effective = %+v", eff)
	}
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\n")
	markStale(t, e, "octo/app") // a push touched it
	e.green("octo/app", 2)
	e.settle("octo/app")
	if m := e.gh.Merges(); len(m) != 2 || m[1].Method != "squash" {
		t.Fatalf("merges = %+v, want the repository's squash", m)
	}
}

func markStale(t *testing.T, e *env, repo string) {
	t.Helper()
	if _, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "push", Tenant: tenant, Repo: repo, Op: leasedo.OpPolicy}, "worker"); err != nil {
		t.Fatal(err)
	}
}

// A bad file keeps the last good policy, says what and where on every
// queued pull request's check run, and is logged once per change.
func TestBadFileKeepsTheLastGoodPolicy(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\n")
	e.pass("octo/app")
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\nblocking_label: [do-not-merge]\n")
	markStale(t, e, "octo/app")
	pr := e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	e.gh.SetCheckRun("octo/app", pr.HeadSHA, "ci", "in_progress", "")
	e.pass("octo/app")
	e.clock.Advance(time.Minute)
	e.pass("octo/app") // the same bad file again: not logged again

	eff := e.r.syncer.Policies().Get(e.key("octo/app"))
	if len(eff.Problems) != 1 || eff.Problems[0].Line != 2 || eff.Config.MergeMethod == nil || *eff.Config.MergeMethod != "squash" {
		t.Fatalf("effective = %+v", eff)
	}
	if got := e.lastTitle(pr.HeadSHA); !strings.HasSuffix(got, "· .github/mergegate.yml:2 has a problem") {
		t.Errorf("check run title = %q", got)
	}
	var summary string
	for _, cr := range e.gh.CheckRuns() {
		summary = cr.Summary
	}
	if !strings.Contains(summary, `octo/app:.github/mergegate.yml:2:1: unknown key "blocking_label" (did you mean "blocking_labels"?)`) ||
		!strings.Contains(summary, "the last good policy") {
		t.Errorf("check run summary = %q", summary)
	}
	if n := strings.Count(e.logs.String(), "policy file has problems"); n != 1 {
		t.Errorf("the problem was logged %d times, want once", n)
	}
	// The queue goes on under the last good policy: squash.
	e.gh.SetCheckRun("octo/app", pr.HeadSHA, "ci", "completed", "success")
	e.settle("octo/app")
	if m := e.gh.Merges(); len(m) != 1 || m[0].Method != "squash" {
		t.Errorf("merges = %+v, want a squash under the last good policy", m)
	}
	// Fixed: the problem is gone.
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\nblocking_labels: [do-not-merge]\n")
	markStale(t, e, "octo/app")
	e.pass("octo/app")
	if eff := e.r.syncer.Policies().Get(e.key("octo/app")); len(eff.Problems) != 0 || len(eff.Config.BlockingLabels) != 1 {
		t.Errorf("after the fix: %+v", eff)
	}
}

// A repository's file is read with conditional requests: the cron's next
// pass costs no rate-limit point for it; without a file, it is not asked
// again within the hour.
func TestPolicyReadsAreCheap(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/with", "main")
	e.gh.AddRepo(tenant, "octo/without", "main")
	e.gh.SetFile("octo/with", policy.Path, "merge_method: squash\n")
	e.pass("octo/with")
	e.pass("octo/without")
	e.gh.ResetCalls()
	e.clock.Advance(5 * time.Minute)
	e.pass("octo/with")
	e.pass("octo/without")
	var reads, free int
	for _, c := range e.gh.Calls() {
		if c.Route == fakegithub.RouteGetContent {
			reads++
			if c.NotModified {
				free++
			}
		}
	}
	if reads != 1 || free != 1 {
		t.Errorf("policy reads on the second pass: %d (%d 304), want the one file, a 304", reads, free)
	}
}

// Frozen from the admin API: entries keep their place and their gates
// are read, nothing merges, every check run says so; thawed, it merges.
func TestFreezeAndThaw(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	pr1 := e.green("octo/app", 1)
	pr2 := e.green("octo/app", 2)
	k := e.key("octo/app")
	if _, err := e.r.syncer.Policies().Freeze(e.ctx, k, "", true, "release Friday", "alice"); err != nil {
		t.Fatal(err)
	}
	e.settle("octo/app")
	if m := e.gh.Merges(); len(m) != 0 {
		t.Fatalf("a frozen queue merged %+v", m)
	}
	if got := e.lastTitle(pr1.HeadSHA); got != "frozen: release Friday · First in line for main" {
		t.Errorf("#1's title = %q", got)
	}
	if got := e.lastTitle(pr2.HeadSHA); got != "frozen: release Friday · Checks passed: waits its turn in the merge queue for main" {
		t.Errorf("#2's title = %q", got)
	}
	if _, err := e.r.syncer.Policies().Freeze(e.ctx, k, "", false, "released", "bob"); err != nil {
		t.Fatal(err)
	}
	e.settle("octo/app")
	if m := e.gh.Merges(); len(m) != 2 {
		t.Errorf("thawed: merges = %+v", m)
	}
}

// priority_labels order the queue: an urgent pull request goes first, and
// its check run says its priority.
func TestPriorityLabels(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "priority_labels: [urgent]\n")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	e.clock.Advance(time.Minute)
	pr2 := e.gh.AddPR("octo/app", fakegithub.PR{Number: 2, Labels: []string{"automerge", "urgent"}})
	e.clock.Advance(time.Minute)
	e.pass("octo/app")
	if got := e.prs("octo/app"); len(got) != 2 || got[0] != 2 {
		t.Fatalf("queue = %v, want #2 (urgent) first", got)
	}
	if got := e.lastTitle(pr2.HeadSHA); !strings.HasPrefix(got, "First in line for main (priority urgent):") {
		t.Errorf("#2's title = %q", got)
	}
}

// delete_branch_after_merge deletes the head branch, but never a fork's,
// nor one another open pull request is based on.
func TestDeleteBranchAfterMerge(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "delete_branch_after_merge: true\nmerge_commit:\n  title: \"{title} (#{number})\"\n")
	pr := e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, Title: "Add feature", HeadRef: "feature-a", Labels: []string{"automerge"}})
	e.gh.SetCheckRun("octo/app", pr.HeadSHA, "ci", "completed", "success")
	fork := e.gh.AddPR("octo/app", fakegithub.PR{Number: 2, HeadRef: "fork-branch", Fork: true, Labels: []string{"automerge"}})
	e.gh.SetCheckRun("octo/app", fork.HeadSHA, "ci", "completed", "success")
	e.join("octo/app", 2, fork.HeadSHA) // its label's delivery: a fork's head the resync finds needs a writer's consent
	base := e.gh.AddPR("octo/app", fakegithub.PR{Number: 3, HeadRef: "stack-base", Labels: []string{"automerge"}})
	e.gh.SetCheckRun("octo/app", base.HeadSHA, "ci", "completed", "success")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 4, HeadRef: "stack-top", BaseRef: "stack-base"}) // based on #3's branch
	e.settle("octo/app")
	m := e.gh.Merges()
	if len(m) != 3 || !slices.ContainsFunc(m, func(m fakegithub.Merge) bool { return m.Title == "Add feature (#1)" }) {
		t.Fatalf("merges = %+v", m)
	}
	if got := e.gh.DeletedBranches(); len(got) != 1 || got[0] != "octo/app:feature-a" {
		t.Errorf("deleted = %v, want only feature-a", got)
	}
}

// The merge commit's templates: the title and body, and the co-authors
// from the commits (other authors, and their own trailers).
func TestMergeCommitTemplates(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\nmerge_commit:\n  title: \"{title} (#{number})\"\n  message: \"{body}\\n\\n{co_authors}\"\n")
	pr := e.gh.AddPR("octo/app", fakegithub.PR{Number: 9, Title: "Faster startup", Body: "Caches the index.", Author: "alice", Labels: []string{"automerge"},
		Commits: []fakegithub.Commit{
			{SHA: "c1", Message: "first", AuthorLogin: "alice", AuthorName: "Alice", AuthorEmail: "alice@example.com"},
			{SHA: "c2", Message: "second\n\nCo-authored-by: Carol <carol@example.com>", AuthorLogin: "bob", AuthorName: "Bob", AuthorEmail: "bob@example.com"},
			{SHA: "c3", Message: "third", AuthorLogin: "bob", AuthorName: "Bob", AuthorEmail: "bob@example.com"},
		}})
	e.gh.SetCheckRun("octo/app", pr.HeadSHA, "ci", "completed", "success")
	e.settle("octo/app")
	m := e.gh.Merges()
	if len(m) != 1 {
		t.Fatalf("merges = %+v", m)
	}
	if m[0].Title != "Faster startup (#9)" || m[0].Message != "Caches the index.\n\nCo-authored-by: Bob <bob@example.com>\nCo-authored-by: Carol <carol@example.com>" {
		t.Errorf("title %q, message %q", m[0].Title, m[0].Message)
	}
}

// A file stored as good by an older mergegate that this one's bounds
// refuse (a blocking_title over 1 KiB) is not in force after the restart:
// its problems show at once, and the next read logs them.
func TestStoredFileOverTheBounds(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "merge_method: squash\n")
	e.pass("octo/app")
	k := e.key("octo/app")
	sp, ok, err := e.store.Policy(e.ctx, k)
	if err != nil || !ok {
		t.Fatalf("stored policy: %+v %v %v", sp, ok, err)
	}
	// What an older version stored: the file with a 2 KiB pattern, good then.
	big := "merge_method: squash\nblocking_title: \"" + strings.Repeat("a", 2048) + "\"\n"
	e.gh.SetFile("octo/app", policy.Path, big)
	f, _, err := e.fc.RepoFile(e.ctx, tenant, "octo/app", policy.Path)
	if err != nil {
		t.Fatal(err)
	}
	sp.Content, sp.SHA = big, f.SHA
	if err := e.store.SavePolicy(e.ctx, sp); err != nil {
		t.Fatal(err)
	}
	e.newReconciler() // a restart: policies loaded from the store
	if err := e.r.syncer.Policies().Load(e.ctx); err != nil {
		t.Fatal(err)
	}
	eff := e.r.syncer.Policies().Get(k)
	if len(eff.Problems) != 1 || !strings.Contains(eff.Problems[0].Msg, "blocking_title is 2048 bytes long") || eff.Config.BlockingTitle != nil {
		t.Fatalf("after the restart: %+v", eff)
	}
	e.pass("octo/app")
	if n := strings.Count(e.logs.String(), "policy file has problems"); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
	if eff := e.r.syncer.Policies().Get(k); len(eff.Problems) != 1 || eff.BadSHA != f.SHA {
		t.Errorf("after the next read: %+v", eff)
	}
}

// Issue 30, hole 6: delete_branch_after_merge deleted main after a
// back-merge from main into develop. A merged head branch is not deleted
// (not even tried) when it is the default branch, protected, covered by a
// ruleset, or its tip is not the merged head.
func TestDeleteBranchKeepsWhatOthersNeed(t *testing.T) {
	for _, tc := range []struct {
		name, head, base string
		setup            func(e *env)
		reason           string
	}{
		{"the default branch", "main", "develop", func(*env) {}, "it is the repository's default branch"},
		{"classic protection", "release", "main", func(e *env) { e.gh.SetRequired("octo/app", "release", nil, false) }, "branch protection covers it"},
		{"a ruleset", "release", "main", func(e *env) { e.gh.SetRulesetLinearHistory("octo/app", "release", true) }, "a ruleset applies to it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.gh.AddRepo(tenant, "octo/app", "main")
			e.gh.SetFile("octo/app", policy.Path, "delete_branch_after_merge: true\n")
			pr := e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, HeadRef: tc.head, BaseRef: tc.base, Labels: []string{"automerge"}})
			e.gh.SetCheckRun("octo/app", pr.HeadSHA, "ci", "completed", "success")
			tc.setup(e)
			e.settle("octo/app")
			if m := e.gh.Merges(); len(m) != 1 {
				t.Fatalf("merges = %+v", m)
			}
			if n := e.gh.CallCount(fakegithub.RouteDeleteRef); n != 0 {
				t.Errorf("%d DELETE of %s, want none: %v", n, tc.head, e.gh.DeletedBranches())
			}
			if !strings.Contains(e.logs.String(), "branch kept after the merge: "+tc.reason) {
				t.Errorf("log lacks %q:\n%s", tc.reason, e.logs.String())
			}
		})
	}
}

// A branch whose tip is not the merged head (pushed to after the merge) is
// kept: the tip is read just before the DELETE.
func TestDeleteBranchKeepsAMovedTip(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	pr := e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, HeadRef: "feature-b"})
	merged := strings.Repeat("0", 40)
	e.r.syncer.deleteBranch(e.ctx, e.key("octo/app"), &forge.PR{Number: 1, HeadRef: "feature-b", HeadSHA: merged}, merged)
	if n := e.gh.CallCount(fakegithub.RouteDeleteRef); n != 0 {
		t.Errorf("%d DELETE of feature-b at %s, merged at %s", n, pr.HeadSHA, merged)
	}
	if !strings.Contains(e.logs.String(), "branch kept after the merge: its tip moved since the merge ("+pr.HeadSHA) {
		t.Errorf("log:\n%s", e.logs.String())
	}
	e.r.syncer.deleteBranch(e.ctx, e.key("octo/app"), &forge.PR{Number: 1, HeadRef: "feature-b", HeadSHA: pr.HeadSHA}, pr.HeadSHA)
	if got := e.gh.DeletedBranches(); len(got) != 1 {
		t.Errorf("deleted = %v, want feature-b at its merged tip", got)
	}
}
