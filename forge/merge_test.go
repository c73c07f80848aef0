package forge_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

func TestMergeAtTheTestedSHA(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 10, HeadSHA: "tested"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 11})

	merged, err := e.c.Merge(e.ctx, tenant, repo, 10, "tested", "squash")
	if err != nil {
		t.Fatal(err)
	}
	want := fakegithub.Merge{Repo: repo, PRNumber: 10, SHA: "tested", Method: "squash", MergeCommitSHA: merged, Seq: 1}
	if got := e.gh.Merges(); len(got) != 1 || got[0] != want {
		t.Errorf("merges = %+v, want [%+v]", got, want)
	}
	if len(merged) != 40 {
		t.Errorf("merge commit sha = %q", merged)
	}
	pr, err := e.c.GetPR(e.ctx, tenant, repo, 10)
	if err != nil {
		t.Fatal(err)
	}
	if pr.State != "closed" || !pr.Merged {
		t.Errorf("after merge: state %q merged %v", pr.State, pr.Merged)
	}
	// The base moved: the other PR is now behind (reported only where
	// branches must be up to date).
	if other, _ := e.gh.PR(repo, 11); !other.Behind {
		t.Error("other PR on the same base not marked behind after a merge")
	}
}

func TestMergeRefusesWithoutGuardOrWithUnknownMethod(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h"})
	if _, err := e.c.Merge(e.ctx, tenant, repo, 1, "", "merge"); err == nil {
		t.Error("Merge without a sha guard succeeded")
	}
	if _, err := e.c.Merge(e.ctx, tenant, repo, 1, "h", "octopus"); err == nil {
		t.Error("Merge with an unknown method succeeded")
	}
	if n := e.gh.CallCount(fakegithub.RouteMerge); n != 0 {
		t.Errorf("merge requests sent = %d, want 0", n)
	}
	if _, err := e.c.Merge(e.ctx, tenant, repo, 1, "h", ""); err != nil {
		t.Fatal(err)
	}
	if m := e.gh.Merges(); len(m) != 1 || m[0].Method != "merge" {
		t.Errorf("empty method: merges = %+v, want method merge", m)
	}
}

func TestMergeHeadMoved409(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 2, HeadSHA: "tested"})
	e.gh.SetHead(repo, 2, "pushed-after-gate")

	_, err := e.c.Merge(e.ctx, tenant, repo, 2, "tested", "merge")
	if !forge.IsHeadModified(err) || forge.IsNotMergeable(err) {
		t.Fatalf("err = %v, want head modified (409)", err)
	}
	var me *forge.MergeError
	if !errors.As(err, &me) || me.Status != http.StatusConflict || me.Message != "Head branch was modified. Review and try the merge again." {
		t.Errorf("MergeError = %+v", me)
	}
	if len(e.gh.Merges()) != 0 {
		t.Error("the untested sha was merged")
	}
}

func TestMergeNotMergeable405(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 3, HeadSHA: "h3"})
	e.gh.SetMergeable(repo, 3, false)

	_, err := e.c.Merge(e.ctx, tenant, repo, 3, "h3", "merge")
	if !forge.IsNotMergeable(err) || forge.IsHeadModified(err) {
		t.Fatalf("err = %v, want not mergeable (405)", err)
	}
	msg, ok := forge.AuthorMessage(err)
	if !ok || msg != "GitHub refused to merge this pull request: Pull Request is not mergeable." {
		t.Errorf("author message = %q, %v", msg, ok)
	}
	if forge.IsTransient(err) {
		t.Error("405 reported as transient")
	}
}

func TestMergeRequiredCheckMissing405(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRequired(repo, "main", []string{"ci"}, false)
	e.gh.AddPR(repo, fakegithub.PR{Number: 4, HeadSHA: "h4"})
	_, err := e.c.Merge(e.ctx, tenant, repo, 4, "h4", "merge")
	var me *forge.MergeError
	if !errors.As(err, &me) || me.Status != 405 || !strings.Contains(me.Message, `"ci"`) {
		t.Fatalf("err = %v, want 405 naming the required check", err)
	}
	e.gh.SetCheckRun(repo, "h4", "ci", "completed", "skipped")
	if _, err := e.c.Merge(e.ctx, tenant, repo, 4, "h4", "merge"); err != nil {
		t.Fatalf("merge after a skipped required check: %v", err)
	}
}

func TestMergeInjected405And422(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 5, HeadSHA: "h5"})
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultStatus(405, "At least 1 approving review is required by reviewers with write access."))
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultStatus(422, "Validation Failed"))

	_, err := e.c.Merge(e.ctx, tenant, repo, 5, "h5", "merge")
	var me *forge.MergeError
	if !errors.As(err, &me) || me.Status != 405 || me.Message != "At least 1 approving review is required by reviewers with write access." {
		t.Errorf("first: %v", err)
	}
	_, err = e.c.Merge(e.ctx, tenant, repo, 5, "h5", "merge")
	if !errors.As(err, &me) || me.Status != 422 || forge.IsNotMergeable(err) || forge.IsHeadModified(err) {
		t.Errorf("second: %v", err)
	}
	if _, err := e.c.Merge(e.ctx, tenant, repo, 5, "h5", "merge"); err != nil {
		t.Errorf("third (faults used up): %v", err)
	}
}

func TestMerge5xxIsTransient(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 6, HeadSHA: "h6"})
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultStatus(502, "Server Error"))

	_, err := e.c.Merge(e.ctx, tenant, repo, 6, "h6", "merge")
	var te *forge.TransientError
	if !errors.As(err, &te) || te.Status != 502 || te.Timeout {
		t.Fatalf("err = %v, want TransientError 502", err)
	}
	if _, ok := forge.AuthorMessage(err); ok {
		t.Error("a 5xx is the operator's problem, not the author's")
	}
	if len(e.gh.Merges()) != 0 {
		t.Error("merge recorded despite the 502")
	}
	// The caller re-reads the PR before retrying.
	if pr, err := e.c.GetPR(e.ctx, tenant, repo, 6); err != nil || pr.Merged {
		t.Fatalf("re-read: %+v %v", pr, err)
	}
	if _, err := e.c.Merge(e.ctx, tenant, repo, 6, "h6", "merge"); err != nil {
		t.Fatal(err)
	}
}

func TestMergeTimeoutIsTransient(t *testing.T) {
	e := newEnv(t, envOpts{timeout: 150 * time.Millisecond, mergeTimeout: 150 * time.Millisecond})
	e.gh.AddPR(repo, fakegithub.PR{Number: 7, HeadSHA: "h7"})
	// Mint the token first so that the timeout hits the merge itself.
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 7); err != nil {
		t.Fatal(err)
	}
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultTimeout())

	start := time.Now()
	_, err := e.c.Merge(e.ctx, tenant, repo, 7, "h7", "merge")
	var te *forge.TransientError
	if !errors.As(err, &te) || !te.Timeout {
		t.Fatalf("err = %v, want a timeout TransientError", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if e.ctx.Err() != nil {
		t.Fatal("caller context must be untouched")
	}
}

// TestSlowMergeIsWaitedForNotSentTwice: a merge or branch update that
// GitHub answers after the ordinary timeout is waited for (MergeTimeout),
// sent once, and succeeds; other requests keep the ordinary timeout.
func TestSlowMergeIsWaitedForNotSentTwice(t *testing.T) {
	e := newEnv(t, envOpts{timeout: 100 * time.Millisecond, mergeTimeout: 5 * time.Second})
	e.gh.AddPR(repo, fakegithub.PR{Number: 7, HeadSHA: "h7"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 8, HeadSHA: "h8"})
	e.gh.SetBehind(repo, 8, true)
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 7); err != nil { // the token, minted
		t.Fatal(err)
	}
	e.gh.Fail(fakegithub.RouteMerge, 1, fakegithub.FaultDelay(300*time.Millisecond))
	e.gh.Fail(fakegithub.RouteUpdateBranch, 1, fakegithub.FaultDelay(300*time.Millisecond))
	if _, err := e.c.Merge(e.ctx, tenant, repo, 7, "h7", "merge"); err != nil {
		t.Fatalf("a merge answered in 300 ms with a 100 ms ordinary timeout: %v", err)
	}
	if err := e.c.UpdateBranch(e.ctx, tenant, repo, 8, "h8"); err != nil {
		t.Fatalf("a branch update answered in 300 ms: %v", err)
	}
	if n := e.gh.CallCount(fakegithub.RouteMerge); n != 1 || len(e.gh.Merges()) != 1 {
		t.Fatalf("merge sent %d times, %d merges; want 1 and 1", n, len(e.gh.Merges()))
	}
	e.gh.Fail(fakegithub.RouteGetPull, 1, fakegithub.FaultDelay(300*time.Millisecond))
	_, err := e.c.GetPR(e.ctx, tenant, repo, 7)
	var te *forge.TransientError
	if !errors.As(err, &te) || !te.Timeout {
		t.Fatalf("a GET answered in 300 ms: %v, want the ordinary timeout", err)
	}
}

func TestUpdateBranch(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRequired(repo, "main", nil, true)
	e.gh.AddPR(repo, fakegithub.PR{Number: 8, HeadSHA: "old"})
	e.gh.SetBehind(repo, 8, true)

	pr, err := e.c.GetPR(e.ctx, tenant, repo, 8)
	if err != nil {
		t.Fatal(err)
	}
	if pr.MergeableState != "behind" {
		t.Fatalf("mergeable_state = %q, want behind", pr.MergeableState)
	}
	if err := e.c.UpdateBranch(e.ctx, tenant, repo, 8, "stale-sha"); !forge.IsHeadModified(err) {
		t.Errorf("update with a wrong expected sha: %v, want head modified", err)
	}
	if err := e.c.UpdateBranch(e.ctx, tenant, repo, 8, "old"); err != nil {
		t.Fatalf("UpdateBranch (202): %v", err)
	}
	ups := e.gh.BranchUpdates()
	if len(ups) != 1 || ups[0].FromSHA != "old" || ups[0].ToSHA == "old" || ups[0].PRNumber != 8 {
		t.Fatalf("branch updates = %+v", ups)
	}
	// The new head's mergeability is computed in the background: the
	// first read says so, the next one has it.
	pr, err = e.c.GetPR(e.ctx, tenant, repo, 8)
	if err != nil {
		t.Fatal(err)
	}
	if pr.HeadSHA != ups[0].ToSHA || pr.MergeableState != "unknown" || pr.Mergeable != nil {
		t.Errorf("first read after update: head %q state %q mergeable %v, want unknown, nil", pr.HeadSHA, pr.MergeableState, pr.Mergeable)
	}
	if pr, err = e.c.GetPR(e.ctx, tenant, repo, 8); err != nil || pr.MergeableState != "clean" {
		t.Errorf("second read after update: state %q, %v; want clean", pr.MergeableState, err)
	}
	if _, err := e.c.Merge(e.ctx, tenant, repo, 8, "old", "merge"); !forge.IsHeadModified(err) {
		t.Errorf("merging the pre-update sha: %v, want 409", err)
	}
}

func TestSlowGitHubTimesOutAsTransient(t *testing.T) {
	e := newEnv(t, envOpts{timeout: 100 * time.Millisecond})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	e.gh.SetLatency(300 * time.Millisecond)
	_, err := e.c.GetPR(e.ctx, tenant, repo, 1) // the token request itself is slow
	var te *forge.TransientError
	if !errors.As(err, &te) || !te.Timeout {
		t.Fatalf("err = %v, want a timeout TransientError", err)
	}
	e.gh.SetLatency(0)
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatalf("after latency is gone: %v", err)
	}
}
