package app

import (
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/policy"
)

// A PR behind a strict base, with update_method: rebase in the policy
// file, is rebased (GraphQL updatePullRequestBranch REBASE, never the REST
// update-branch, which merges), once; the rebased head is gated again and
// merged at that head after its own checks pass.
func TestBehindBaseRebasedWithUpdateMethodRebase(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "update_method: rebase\n")
	h.pushPolicy()
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	h.label(6, shaA)
	h.gh.SetBehind(testRepo, 6, true)
	h.pass(shaA)
	h.eventually("the rebase", func() bool { return len(h.gh.BranchUpdates()) == 1 })
	h.settle()
	up := h.gh.BranchUpdates()[0]
	if up.Method != "rebase" || up.FromSHA != shaA || up.PRNumber != 6 {
		t.Fatalf("branch update = %+v, want #6 rebased from %s", up, shaA)
	}
	if n := h.gh.CallCount(fakegithub.RouteUpdateBranch); n != 0 {
		t.Fatalf("REST update-branch (a merge) called %d times, want 0", n)
	}
	if n := h.gh.CallCount(fakegithub.RouteGraphQL); n != 1 {
		t.Fatalf("GraphQL called %d times, want 1", n)
	}
	// Further events for the old head ask for no second update, and the
	// old head is not merged.
	h.checkSuite(shaA)
	h.settle()
	if n := len(h.gh.BranchUpdates()); n != 1 || len(h.merges()) != 0 {
		t.Fatalf("branch updates %d, merges %+v; want 1 update and no merge before the new head's checks", n, h.merges())
	}
	// The rebased head: its checks run again, then it merges at that head.
	h.mustSend("pull_request", h.prPayload("synchronize", 6, up.ToSHA, "automerge"))
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatal("merged the rebased head before its checks passed")
	}
	h.pass(up.ToSHA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.SHA != up.ToSHA || m.PRNumber != 6 {
		t.Fatalf("merged %+v, want #6 at the rebased head %s", m, up.ToSHA)
	}
	if n := h.gh.CallCount(fakegithub.RouteUpdateBranch); n != 0 {
		t.Fatalf("REST update-branch called %d times, want 0", n)
	}
	h.noBounce()
}
