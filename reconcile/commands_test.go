package reconcile

import (
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

// command stores a comment command as the webhook path does.
func (e *env) command(repo string, pr int, by, name, arg string) int64 {
	e.t.Helper()
	id := e.gh.AddComment(repo, pr, by, "@mergegate "+name+" "+arg)
	if _, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "issue_comment", Tenant: tenant, Repo: repo, Action: "created",
		Op: leasedo.OpCommand, PRNumber: pr, Details: &leasedo.Details{Command: name, Arg: arg, By: by, CommentID: id}}, "worker"); err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) sync(repo string) {
	e.t.Helper()
	l, err := e.store.Acquire(e.ctx, e.key(repo), "worker")
	if err != nil {
		e.t.Fatal(err)
	}
	defer e.store.Release(e.ctx, l) //nolint:errcheck
	if _, err := e.r.syncer.Sync(e.ctx, l); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) reactions() []string {
	var out []string
	for _, r := range e.gh.Reactions() {
		out = append(out, r.Content)
	}
	return out
}

// Each command from someone who may write, answered with a reaction.
func TestCommands(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetRole("octo/app", "alice", "write")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1})
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 2})

	e.command("octo/app", 1, "alice", "queue", "")
	e.command("octo/app", 2, "alice", "queue", "")
	e.sync("octo/app")
	if got := e.prs("octo/app"); len(got) != 2 {
		t.Fatalf("queue after @mergegate queue = %v", got)
	}
	if pr, _ := e.gh.PR("octo/app", 1); len(pr.Labels) != 1 || pr.Labels[0] != "automerge" {
		t.Errorf("#1's labels = %v, want the trigger label added", pr.Labels)
	}
	e.command("octo/app", 2, "alice", "priority", "high")
	e.sync("octo/app")
	if got := e.prs("octo/app"); got[0] != 2 {
		t.Errorf("queue after @mergegate priority high on #2 = %v", got)
	}
	if it := e.items("octo/app")[0]; it.PriorityName != "high" {
		t.Errorf("#2's priority = %d %q", it.Priority, it.PriorityName)
	}
	e.command("octo/app", 1, "alice", "cancel", "")
	e.sync("octo/app")
	if got := e.prs("octo/app"); len(got) != 1 || got[0] != 2 {
		t.Errorf("queue after @mergegate cancel on #1 = %v", got)
	}
	if pr, _ := e.gh.PR("octo/app", 1); len(pr.Labels) != 0 {
		t.Errorf("#1's labels after cancel = %v", pr.Labels)
	}
	e.gh.SetFile("octo/app", policy.Path, "merge_method: rebase\n")
	e.command("octo/app", 2, "alice", "refresh", "")
	e.sync("octo/app")
	if eff := e.r.syncer.Policies().Get(e.key("octo/app")); eff.Config.MergeMethod == nil || *eff.Config.MergeMethod != "rebase" {
		t.Errorf("after @mergegate refresh: %+v", eff)
	}
	if got := e.reactions(); len(got) != 5 {
		t.Errorf("reactions = %v, want one +1 per command", got)
	}
	if len(e.gh.Comments()) != 0 {
		t.Errorf("replies = %+v, want none (all carried out)", e.gh.Comments())
	}
	var audited int
	for _, a := range e.audit("octo/app") {
		if a.Action == leasedo.AuditCommand {
			audited++
		}
	}
	if audited != 5 {
		t.Errorf("%d commands in the audit log, want 5", audited)
	}
}

// Someone who may not write gets a short reply, and nothing happens; the
// permission is read once for several commands. A user is replied to
// once an hour: their later refused commands get a "confused" reaction.
func TestCommandRefusals(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetRole("octo/app", "tri", "triage")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1})
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 2, Draft: true})
	e.gh.SetRole("octo/app", "alice", "maintain")
	e.gh.SetRole("octo/app", "bob", "write")
	e.command("octo/app", 1, "tri", "queue", "")
	e.command("octo/app", 1, "tri", "priority", "high")
	e.command("octo/app", 2, "alice", "queue", "")
	e.command("octo/app", 1, "alice", "invalid", "@mergegate merge now")
	e.command("octo/app", 1, "bob", "invalid", "@mergegate merge now")
	e.sync("octo/app")
	if got := e.prs("octo/app"); len(got) != 0 {
		t.Errorf("queue = %v, want nothing queued", got)
	}
	c := e.gh.Comments()
	if len(c) != 3 {
		t.Fatalf("replies = %+v", c)
	}
	for i, want := range []string{
		"@tri: only people who can write to this repository can give mergegate commands (your role here is triage).",
		"@alice: mergegate cannot queue this pull request: pull request is a draft.",
		"@bob: mergegate did not understand \"@mergegate merge now\"",
	} {
		if !strings.HasPrefix(c[i].Body, want) {
			t.Errorf("reply %d = %q, want %q...", i, c[i].Body, want)
		}
	}
	if n := e.gh.CallCount(fakegithub.RouteGetPermission); n != 3 {
		t.Errorf("permission read %d times, want once per user", n)
	}
	if got := strings.Join(e.reactions(), " "); got != "confused confused" {
		t.Errorf("reactions = %v, want tri's and alice's second refusal answered by a reaction", got)
	}
	e.clock.Advance(toldTTL)
	e.command("octo/app", 1, "tri", "queue", "")
	e.sync("octo/app")
	if c := e.gh.Comments(); len(c) != 4 || !strings.HasPrefix(c[3].Body, "@tri: only people") {
		t.Errorf("replies an hour later = %+v, want tri told again", c)
	}
}

// A comment stored with several commands (before mergegate read one per
// comment) has only its first carried out.
func TestOneCommandPerComment(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1})
	id := e.command("octo/app", 1, "tri", "queue", "")
	for range 3 {
		if _, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "issue_comment", Tenant: tenant, Repo: "octo/app", Action: "created",
			Op: leasedo.OpCommand, PRNumber: 1, Details: &leasedo.Details{Command: "cancel", By: "tri", CommentID: id}}, "worker"); err != nil {
			t.Fatal(err)
		}
	}
	e.sync("octo/app")
	if c := e.gh.Comments(); len(c) != 1 {
		t.Errorf("replies = %+v, want one for the comment", c)
	}
	if r := e.reactions(); len(r) != 0 {
		t.Errorf("reactions = %v, want none (the comment was replied to)", r)
	}
}

// label_requires_write: a trigger label added by a Triage user does not
// queue the pull request.
func TestLabelRequiresWrite(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetRole("octo/app", "tri", "triage")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, Labels: []string{"automerge"}})
	e.join("octo/app", 1, mustPR(e, "octo/app", 1).HeadSHA)
	if _, err := e.store.ProcessEvent(e.ctx, leasedo.Event{EventType: "pull_request", Tenant: tenant, Repo: "octo/app", Action: "labeled",
		Op: leasedo.OpCommand, PRNumber: 1, Details: &leasedo.Details{Command: "label", By: "tri"}}, "worker"); err != nil {
		t.Fatal(err)
	}
	e.sync("octo/app")
	if got := e.prs("octo/app"); len(got) != 0 {
		t.Errorf("queue = %v, want #1 out", got)
	}
	if r := e.gh.LabelsRemoved(); len(r) != 1 || r[0].Label != "automerge" {
		t.Errorf("labels removed = %+v", r)
	}
	if c := e.gh.Comments(); len(c) != 1 || !strings.Contains(c[0].Body, "your role here is triage") {
		t.Errorf("replies = %+v", c)
	}
}

func mustPR(e *env, repo string, n int) fakegithub.PR {
	pr, ok := e.gh.PR(repo, n)
	if !ok {
		e.t.Fatalf("no PR %s#%d", repo, n)
	}
	return pr
}

// label_requires_write holds for a label the cron's resync finds too:
// who added it is read from the issue events.
func TestLabelRequiresWriteOnResync(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.SetFile("octo/app", policy.Path, "label_requires_write: true\n")
	e.gh.SetRole("octo/app", "tri", "triage")
	e.gh.SetRole("octo/app", "alice", "write")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1, Author: "tri", Labels: []string{"automerge"}})
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 2, Author: "alice", Labels: []string{"automerge"}})
	e.pass("octo/app")
	if got := e.prs("octo/app"); len(got) != 1 || got[0] != 2 {
		t.Errorf("queue = %v, want only #2 (labelled by a writer)", got)
	}
}

// After toldReactions reactions within the hour, a user's refused commands
// get nothing more (each is still in the audit log).
func TestCommandRefusalsStopReacting(t *testing.T) {
	e := newEnv(t)
	e.gh.AddRepo(tenant, "octo/app", "main")
	e.gh.AddPR("octo/app", fakegithub.PR{Number: 1})
	for range toldReactions + 5 {
		e.command("octo/app", 1, "tri", "queue", "")
	}
	e.sync("octo/app")
	if c := e.gh.Comments(); len(c) != 1 {
		t.Errorf("replies = %+v, want 1", c)
	}
	if r := e.reactions(); len(r) != toldReactions {
		t.Errorf("%d reactions, want %d, then nothing", len(r), toldReactions)
	}
}
