package forge_test

import (
	"net/url"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

func TestGraphQLURL(t *testing.T) {
	for base, want := range map[string]string{
		"https://api.github.com/":             "https://api.github.com/graphql",
		"https://ghe.example.com/api/v3/":     "https://ghe.example.com/api/graphql",
		"https://ghe.example.com/api/v3":      "https://ghe.example.com/api/graphql",
		"https://ghe.example.com/git/api/v3/": "https://ghe.example.com/git/api/graphql",
		"http://127.0.0.1:8080/":              "http://127.0.0.1:8080/graphql",
	} {
		u, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		if got := forge.GraphQLURL(u); got != want {
			t.Errorf("GraphQLURL(%s) = %s, want %s", base, got, want)
		}
	}
}

func testRebaseBranch(t *testing.T, prefix string) {
	e := newEnv(t, envOpts{prefix: prefix})
	e.gh.SetRequired(repo, "main", nil, true)
	e.gh.AddPR(repo, fakegithub.PR{Number: 8, HeadSHA: "old"})
	e.gh.SetBehind(repo, 8, true)

	pr, err := e.c.GetPR(e.ctx, tenant, repo, 8)
	if err != nil {
		t.Fatal(err)
	}
	if pr.NodeID == "" {
		t.Fatal("GetPR: no node_id")
	}
	_, err = e.c.RebaseBranch(e.ctx, tenant, repo, 8, pr.NodeID, "stale-sha")
	if !forge.IsHeadModified(err) {
		t.Errorf("rebase with a wrong expected head: %v, want head modified", err)
	}
	if kind, _, ok := forge.RefusalOf(err); !ok || kind != forge.RefusedHeadModified {
		t.Errorf("RefusalOf(%v) = %v %v, want head modified", err, kind, ok)
	}
	head, err := e.c.RebaseBranch(e.ctx, tenant, repo, 8, pr.NodeID, "old")
	if err != nil {
		t.Fatalf("RebaseBranch: %v", err)
	}
	ups := e.gh.BranchUpdates()
	if len(ups) != 1 || ups[0].FromSHA != "old" || ups[0].ToSHA != head || head == "old" || ups[0].Method != "rebase" {
		t.Fatalf("branch updates = %+v (head %q), want one rebase from old", ups, head)
	}
	if n := e.gh.CallCount(fakegithub.RouteUpdateBranch); n != 0 {
		t.Errorf("REST update-branch called %d times, want 0", n)
	}
	if n := e.gh.CallCount(fakegithub.RouteGraphQL); n != 2 {
		t.Errorf("GraphQL called %d times, want 2", n)
	}
	if pr, err = e.c.GetPR(e.ctx, tenant, repo, 8); err != nil || pr.HeadSHA != head {
		t.Fatalf("head after rebase %q, %v; want %q", pr.HeadSHA, err, head)
	}

	// Not behind any more: GitHub says there is nothing to do.
	_, err = e.c.RebaseBranch(e.ctx, tenant, repo, 8, "", head) // "" reads the node id
	if kind, msg, ok := forge.RefusalOf(err); !ok || kind != forge.RefusedNoNewCommits {
		t.Errorf("rebase of an up-to-date branch: %v (%v %q %v), want no new commits", err, kind, msg, ok)
	}
	if msg, ok := forge.AuthorMessage(err); !ok || msg == "" {
		t.Errorf("AuthorMessage(%v) = %q, %v", err, msg, ok)
	}

	// Conflicts.
	e.gh.AddPR(repo, fakegithub.PR{Number: 9, HeadSHA: "h9", Unmergeable: true})
	e.gh.SetBehind(repo, 9, true)
	_, err = e.c.RebaseBranch(e.ctx, tenant, repo, 9, "", "h9")
	if kind, _, ok := forge.RefusalOf(err); !ok || kind != forge.RefusedConflict {
		t.Errorf("rebase with conflicts: %v, want a conflict refusal", err)
	}

	// A fork that does not allow maintainers' edits: FORBIDDEN.
	e.gh.AddPR(repo, fakegithub.PR{Number: 10, HeadSHA: "h10", Fork: true})
	e.gh.SetBehind(repo, 10, true)
	_, err = e.c.RebaseBranch(e.ctx, tenant, repo, 10, "", "h10")
	if kind, _, ok := forge.RefusalOf(err); !ok || kind != forge.RefusedNotAuthorized {
		t.Errorf("rebase of a fork without maintainer edits: %v, want not authorized", err)
	}

	// An unknown node id: NOT_FOUND, the operator's.
	if _, err = e.c.RebaseBranch(e.ctx, tenant, repo, 8, "PR_nope", head); !forge.IsNotFound(err) {
		t.Errorf("unknown node id: %v, want not found", err)
	}
	if len(e.gh.BranchUpdates()) != 1 {
		t.Errorf("branch updates = %+v, want only the first", e.gh.BranchUpdates())
	}
}

func TestRebaseBranch(t *testing.T)           { testRebaseBranch(t, "") }
func TestRebaseBranchEnterprise(t *testing.T) { testRebaseBranch(t, "/api/v3") }

// A rebase goes through GraphQL, whose quota is its own: its answers cost
// no REST point and their rate headers (resource "graphql") do not move
// what the client knows of the REST quota.
func TestRebaseLeavesTheRESTQuotaAlone(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetRequired(repo, "main", nil, true)
	e.gh.AddPR(repo, fakegithub.PR{Number: 8, HeadSHA: "old"})
	e.gh.SetBehind(repo, 8, true)
	e.gh.SetRateLimit(tenant, 5000, 10)
	pr, err := e.c.GetPR(e.ctx, tenant, repo, 8)
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := e.c.RateRemaining(tenant)
	if _, err := e.c.RebaseBranch(e.ctx, tenant, repo, 8, pr.NodeID, "old"); err != nil {
		t.Fatal(err)
	}
	if after, _, _ := e.c.RateRemaining(tenant); after != before {
		t.Errorf("REST points remaining %d -> %d across a rebase, want unchanged (GraphQL has its own quota)", before, after)
	}
}
