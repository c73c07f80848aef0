package forge_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

func TestNewValidatesConfig(t *testing.T) {
	gh := fakegithub.New(t)
	if _, err := forge.New(forge.Config{AppID: 1, PrivateKey: []byte("not a key")}); err == nil {
		t.Error("New accepted a key that is not PEM")
	}
	if _, err := forge.New(forge.Config{AppID: 0, PrivateKey: gh.PrivateKeyPEM()}); err == nil {
		t.Error("New accepted App id 0")
	}
	if _, err := forge.New(forge.Config{AppID: 1, PrivateKey: gh.PrivateKeyPEM(), BaseURL: "ftp://x"}); err == nil {
		t.Error("New accepted a non-HTTP base URL")
	}
	c, err := forge.New(forge.Config{AppID: 1, PrivateKey: gh.PrivateKeyPEM()})
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	if _, err := c.GetPR(t.Context(), "not-a-number", repo, 1); err == nil {
		t.Error("GetPR accepted a tenant that is not an installation id")
	}
	if _, err := c.GetPR(t.Context(), tenant, "no-slash", 1); err == nil {
		t.Error("GetPR accepted a repo that is not owner/name")
	}
}

func TestGetPRFields(t *testing.T) {
	e := newEnv(t, envOpts{})
	created := e.clock.Now().Add(-time.Hour).UTC()
	e.gh.AddPR(repo, fakegithub.PR{Number: 7, HeadSHA: "abc123", HeadRef: "feat", Author: "alice",
		Labels: []string{"automerge", "bug"}, AutoMerge: true, CreatedAt: created})

	pr, err := e.c.GetPR(e.ctx, tenant, repo, 7)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 7 || pr.State != "open" || pr.HeadSHA != "abc123" || pr.HeadRef != "feat" ||
		pr.BaseRef != "main" || pr.Author != "alice" || !pr.AutoMerge || pr.Draft || pr.Merged {
		t.Errorf("GetPR = %+v", pr)
	}
	if !slices.Equal(pr.Labels, []string{"automerge", "bug"}) {
		t.Errorf("labels = %v", pr.Labels)
	}
	if pr.Mergeable == nil || !*pr.Mergeable || pr.MergeableState != "clean" {
		t.Errorf("mergeable = %v, state %q; want true, clean", pr.Mergeable, pr.MergeableState)
	}
	if !pr.CreatedAt.Equal(created) {
		t.Errorf("created_at = %v, want %v", pr.CreatedAt, created)
	}
	if pr.HTMLURL != "https://github.com/octo/widgets/pull/7" {
		t.Errorf("html_url = %q", pr.HTMLURL)
	}

	_, err = e.c.GetPR(e.ctx, tenant, repo, 99)
	if !forge.IsNotFound(err) {
		t.Errorf("GetPR of a missing PR: err = %v, want a 404 APIError", err)
	}
}

func TestInstallationTokenMintedOnceAndCached(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	for i := 0; i < 5; i++ {
		if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.c.ListOpenPRs(e.ctx, tenant, repo); err != nil {
		t.Fatal(err)
	}
	if n := e.gh.TokensIssued(); n != 1 {
		t.Errorf("tokens issued = %d, want 1 for 6 calls", n)
	}
	if n := e.gh.CallCount(fakegithub.RouteCreateToken); n != 1 {
		t.Errorf("token requests = %d, want 1", n)
	}
}

func TestInstallationTokenRefreshedWhenExpired(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	// Tokens expire one hour after the fake's clock: two hours back, they
	// are already expired for ghinstallation (wall clock), which must ask
	// for a new one on every call.
	e.clock.Advance(-2 * time.Hour)
	for i := 0; i < 2; i++ {
		if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.gh.TokensIssued(); n != 2 {
		t.Errorf("tokens issued = %d, want 2 (one per call with expired tokens)", n)
	}
}

func TestUnknownInstallationIsAnOperatorError(t *testing.T) {
	e := newEnv(t, envOpts{})
	_, err := e.c.GetPR(e.ctx, "999", repo, 1)
	if !forge.IsNotFound(err) {
		t.Fatalf("err = %v, want 404 APIError from the token request", err)
	}
	if _, ok := forge.AuthorMessage(err); ok {
		t.Error("an installation problem must not be reported to the PR's author")
	}
}

func TestGHESBaseURLWithPathPrefix(t *testing.T) {
	e := newEnv(t, envOpts{prefix: "/api/v3"})
	if !strings.HasSuffix(e.gh.URL(), "/api/v3/") {
		t.Fatalf("fake URL = %q", e.gh.URL())
	}
	e.gh.AddPR(repo, fakegithub.PR{Number: 3, HeadSHA: "s3"})
	pr, err := e.c.GetPR(e.ctx, tenant, repo, 3)
	if err != nil {
		t.Fatal(err)
	}
	if pr.HeadSHA != "s3" {
		t.Errorf("head = %q", pr.HeadSHA)
	}
	calls := e.gh.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls = %+v, want token + pull", calls)
	}
	if calls[0].Path != "/api/v3/app/installations/"+tenant+"/access_tokens" || calls[0].Status != 201 {
		t.Errorf("token call = %+v", calls[0])
	}
	if calls[1].Path != "/api/v3/repos/octo/widgets/pulls/3" || calls[1].Status != 200 {
		t.Errorf("pull call = %+v", calls[1])
	}
}

func TestListOpenPRsAllPages(t *testing.T) {
	e := newEnv(t, envOpts{})
	for n := 1; n <= 230; n++ {
		e.gh.AddPR(repo, fakegithub.PR{Number: n})
	}
	e.gh.ClosePR(repo, 5)
	prs, err := e.c.ListOpenPRs(e.ctx, tenant, repo)
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 229 {
		t.Fatalf("got %d open PRs, want 229", len(prs))
	}
	seen := map[int]bool{}
	for _, pr := range prs {
		if pr.State != "open" || seen[pr.Number] || pr.Number == 5 {
			t.Fatalf("unexpected PR %+v (duplicate or closed)", pr)
		}
		seen[pr.Number] = true
	}
	if n := e.gh.CallCount(fakegithub.RouteListPulls); n != 3 {
		t.Errorf("list requests = %d, want 3 pages of 100", n)
	}
}

func TestListInstallationRepos(t *testing.T) {
	e := newEnv(t, envOpts{})
	for i := 0; i < 120; i++ {
		e.gh.AddRepo(tenant, fmt.Sprintf("octo/r%03d", i), "main")
	}
	e.gh.AddRepo("777", "other/hidden", "main") // another installation
	repos, err := e.c.ListInstallationRepos(e.ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(repos) != 121 || !slices.Contains(repos, repo) || slices.Contains(repos, "other/hidden") {
		t.Errorf("repos = %d %v...", len(repos), repos[:3])
	}
	if n := e.gh.CallCount(fakegithub.RouteInstallationRepos); n != 2 {
		t.Errorf("requests = %d, want 2 pages", n)
	}
}

func TestRequiredChecks(t *testing.T) {
	e := newEnv(t, envOpts{})
	get := func(branch string) forge.Required {
		t.Helper()
		req, err := e.c.RequiredChecks(e.ctx, tenant, repo, branch)
		if err != nil {
			t.Fatalf("RequiredChecks(%s): %v", branch, err)
		}
		return req
	}

	if req := get("main"); req.Configured || req.Strict || len(req.Contexts) != 0 {
		t.Errorf("unprotected branch: %+v, want nothing configured", req)
	}

	// A 404 cannot be asked for conditionally: the Client takes the
	// branch to be unprotected for a while, until told to forget it.
	e.gh.SetRequired(repo, "main", []string{"ci/build", "lint"}, false)
	if req := get("main"); req.Configured {
		t.Errorf("protection read again within the hour: %+v", req)
	}
	e.c.ForgetRules(tenant, repo, "main")
	if req := get("main"); !req.Configured || req.Strict || !slices.Equal(req.Contexts, []string{"ci/build", "lint"}) {
		t.Errorf("protection only: %+v", req)
	}

	e.gh.SetRulesetRequired(repo, "main", []string{"lint", "security"}, true)
	if req := get("main"); !req.Configured || !req.Strict || !slices.Equal(req.Contexts, []string{"ci/build", "lint", "security"}) {
		t.Errorf("protection + ruleset: %+v, want union and strict from the ruleset", req)
	}

	e.gh.RemoveProtection(repo, "main")
	if req := get("main"); !req.Configured || !req.Strict || !slices.Equal(req.Contexts, []string{"lint", "security"}) {
		t.Errorf("ruleset only: %+v", req)
	}

	e.gh.SetRulesetRequired(repo, "release/1.x", []string{"e2e"}, false)
	if req := get("release/1.x"); !req.Configured || !slices.Equal(req.Contexts, []string{"e2e"}) {
		t.Errorf("branch with a slash: %+v", req)
	}
}

func TestCheckResults(t *testing.T) {
	e := newEnv(t, envOpts{})
	sha := "deadbeef"
	e.gh.AddCheckRun(repo, sha, "build", "completed", "failure")
	e.clock.Advance(time.Minute)
	e.gh.AddCheckRun(repo, sha, "build", "completed", "success") // re-run
	e.gh.SetCheckRun(repo, sha, "lint", "in_progress", "")
	e.gh.SetStatus(repo, sha, "ci/legacy", "pending")
	e.gh.SetStatus(repo, sha, "ci/legacy", "success")
	e.gh.SetStatus(repo, sha, "deploy", "error")
	e.gh.SetCheckRun(repo, "other", "build", "completed", "failure")

	res, err := e.c.CheckResults(e.ctx, tenant, repo, sha)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]forge.CheckResult{}
	for _, r := range res {
		k := r.Source + ":" + r.Name
		if _, dup := got[k]; dup {
			t.Errorf("duplicate result %s", k)
		}
		got[k] = r
	}
	want := map[string][2]string{
		"check_run:build":  {"completed", "success"},
		"check_run:lint":   {"in_progress", ""},
		"status:ci/legacy": {"completed", "success"},
		"status:deploy":    {"completed", "error"},
	}
	if len(got) != len(want) {
		t.Errorf("results = %+v", res)
	}
	for k, w := range want {
		if r := got[k]; r.Status != w[0] || r.Conclusion != w[1] {
			t.Errorf("%s = %q/%q, want %q/%q", k, r.Status, r.Conclusion, w[0], w[1])
		}
	}
}

func TestCommentAndRemoveLabel(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 4, Labels: []string{"automerge", "keep"}})
	if err := e.c.Comment(e.ctx, tenant, repo, 4, "Required check \"ci\" failed."); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RemoveLabel(e.ctx, tenant, repo, 4, "automerge"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.RemoveLabel(e.ctx, tenant, repo, 4, "automerge"); err != nil {
		t.Errorf("removing a label that is gone: %v, want nil", err)
	}
	if got := e.gh.Comments(); len(got) != 1 || got[0] != (fakegithub.Comment{Repo: repo, PRNumber: 4, Body: "Required check \"ci\" failed."}) {
		t.Errorf("comments = %+v", got)
	}
	if got := e.gh.LabelsRemoved(); len(got) != 1 || got[0] != (fakegithub.LabelRemoval{Repo: repo, PRNumber: 4, Label: "automerge"}) {
		t.Errorf("labels removed = %+v", got)
	}
	if pr, _ := e.gh.PR(repo, 4); !slices.Equal(pr.Labels, []string{"keep"}) {
		t.Errorf("labels left = %v", pr.Labels)
	}
}

func TestCheckRunCreateAndUpdate(t *testing.T) {
	e := newEnv(t, envOpts{})
	id, err := e.c.CreateCheckRun(e.ctx, tenant, repo, "sha1", forge.CheckRun{Status: "in_progress", Title: "Queued: position 2", Summary: "Waiting for #3."})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.UpdateCheckRun(e.ctx, tenant, repo, id, forge.CheckRun{Conclusion: "failure", Title: "Bounced", Summary: "Required check \"ci\" concluded failure."}); err != nil {
		t.Fatal(err)
	}
	w := e.gh.CheckRuns()
	if len(w) != 2 {
		t.Fatalf("writes = %+v", w)
	}
	if w[0].Action != "created" || w[0].Name != "mergegate" || w[0].HeadSHA != "sha1" || w[0].Status != "in_progress" || w[0].Title != "Queued: position 2" {
		t.Errorf("create = %+v", w[0])
	}
	if w[1].Action != "updated" || w[1].ID != id || w[1].Status != "completed" || w[1].Conclusion != "failure" || w[1].Summary != "Required check \"ci\" concluded failure." {
		t.Errorf("update = %+v", w[1])
	}
	// mergegate's own check run is reported back but never gates itself.
	res, err := e.c.CheckResults(e.ctx, tenant, repo, "sha1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Name != "mergegate" {
		t.Fatalf("results = %+v", res)
	}
	if v := forge.EvaluateGate(forge.Required{}, res, nil); v.Result != forge.GatePending {
		t.Errorf("gate with only mergegate's own run = %+v, want pending", v)
	}
}

func TestRateRemaining(t *testing.T) {
	e := newEnv(t, envOpts{})
	if _, _, known := e.c.RateRemaining(tenant); known {
		t.Error("rate known before any call")
	}
	e.gh.AddPR(repo, fakegithub.PR{Number: 1})
	if _, err := e.c.GetPR(e.ctx, tenant, repo, 1); err != nil {
		t.Fatal(err)
	}
	rem, reset, known := e.c.RateRemaining(tenant)
	if !known || rem != e.gh.RateLimitRemaining(tenant) || rem != 4999 {
		t.Errorf("remaining = %d (known %v), fake says %d", rem, known, e.gh.RateLimitRemaining(tenant))
	}
	if want := e.clock.Now().Add(time.Hour); !reset.Equal(want) {
		t.Errorf("reset = %v, want %v", reset, want)
	}
}
