package forge_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

// These tests serve GitHub's own example answers (testdata/github-rest,
// MIT, see NOTICE.md) to the real client, go-github style: a mux on
// httptest, one handler per endpoint.

func fixtureBytes(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "github-rest", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func serveFixtures(t *testing.T, routes map[string]func(w http.ResponseWriter, r *http.Request)) *forge.Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		var tok map[string]any
		json.Unmarshal(fixtureBytes(t, "apps_create-installation-access-token.201.json"), &tok)
		tok["expires_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(tok)
	})
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	// App id 7: the examples' App (octoapp) is id 1, and CheckSuites leaves
	// out the Client's own App.
	c, err := forge.New(forge.Config{BaseURL: srv.URL + "/", AppID: 7, PrivateKey: pemKey})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func file(t *testing.T, status int, name string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(fixtureBytes(t, name))
	}
}

func TestGitHubExamplesDecode(t *testing.T) {
	c := serveFixtures(t, map[string]func(http.ResponseWriter, *http.Request){
		"GET /repos/octocat/Hello-World/pulls/1347":                 file(t, 200, "pulls_get.200.json"),
		"GET /repos/octocat/Hello-World/pulls":                      file(t, 200, "pulls_list.200.json"),
		"GET /repos/octocat/Hello-World/branches/master/protection": file(t, 200, "repos_get-branch-protection.200.json"),
		"GET /repos/octocat/Hello-World/commits/{ref}/check-suites": file(t, 200, "checks_list-suites-for-ref.200.json"),
		"GET /repos/octocat/Hello-World/pulls/1347/reviews":         file(t, 200, "pulls_list-reviews.200.json"),
		"GET /repos/octocat/Hello-World/rules/branches/master":      file(t, 200, "repos_get-branch-rules.200.json"),
		"GET /repos/octocat/Hello-World/commits/{ref}/check-runs":   file(t, 200, "checks_list-for-ref.200.json"),
		"GET /repos/octocat/Hello-World/commits/{ref}/status":       file(t, 200, "repos_get-combined-status-for-ref.200.json"),
		"PUT /repos/octocat/Hello-World/pulls/1347/merge":           file(t, 200, "pulls_merge.200.json"),
		"PUT /repos/octocat/Hello-World/pulls/1/merge":              file(t, 405, "pulls_merge.405.json"),
		"PUT /repos/octocat/Hello-World/pulls/2/merge":              file(t, 409, "pulls_merge.409.json"),
		"PUT /repos/octocat/Hello-World/pulls/1347/update-branch":   file(t, 202, "pulls_update-branch.202.json"),
		"POST /repos/octocat/Hello-World/check-runs":                file(t, 201, "checks_create.201.example-of-completed-conclusion.json"),
		"GET /installation/repositories":                            file(t, 200, "apps_list-repos-accessible-to-installation.200.json"),
	})
	ctx := t.Context()
	const r = "octocat/Hello-World"

	pr, err := c.GetPR(ctx, "1", r, 1347)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 1347 || pr.State != "open" || pr.HeadSHA != "6dcb09b5b57875f334f61aebed695e2e4193db5e" ||
		pr.HeadRef != "new-topic" || pr.BaseRef != "master" || pr.Author != "octocat" ||
		!slices.Equal(pr.Labels, []string{"bug"}) || pr.Mergeable == nil || !*pr.Mergeable || pr.MergeableState != "clean" || pr.AutoMerge {
		t.Errorf("GetPR = %+v", pr)
	}
	prs, err := c.ListOpenPRs(ctx, "1", r)
	if err != nil || len(prs) != 1 || prs[0].Number != 1347 {
		t.Errorf("ListOpenPRs = %+v, %v", prs, err)
	}
	if pr.BaseSHA != "6dcb09b5b57875f334f61aebed695e2e4193db5e" || pr.Fork || !pr.MaintainerCanModify || pr.AutoMergeMethod != "" ||
		pr.Methods == nil || *pr.Methods != (forge.MergeMethods{Merge: true, Squash: true, Rebase: true}) {
		t.Errorf("GetPR facts = base %s fork %v mcm %v auto %q methods %+v", pr.BaseSHA, pr.Fork, pr.MaintainerCanModify, pr.AutoMergeMethod, pr.Methods)
	}
	// The protection example: no "strict" (false), reviews, linear
	// history and conversation resolution on.
	req, err := c.RequiredChecks(ctx, "1", r, "master")
	wantReq := forge.Required{Contexts: []string{"continuous-integration/travis-ci"}, Configured: true,
		Reviews: 2, CodeOwners: true, Conversations: true, LinearHistory: true}
	if err != nil || !slices.Equal(req.Contexts, wantReq.Contexts) || req.AppIDs != nil || req.Strict != wantReq.Strict || req.Configured != wantReq.Configured ||
		req.Reviews != wantReq.Reviews || req.CodeOwners != wantReq.CodeOwners || req.Conversations != wantReq.Conversations ||
		req.LinearHistory != wantReq.LinearHistory || req.MergeQueue {
		t.Errorf("RequiredChecks = %+v, %v; want %+v", req, err, wantReq)
	}
	suites, err := c.CheckSuites(ctx, "1", r, "d6fde92930d4715a2b49857d24b940956b26d2d3")
	if err != nil || len(suites) != 1 || suites[0] != (forge.CheckSuite{AppID: 1, AppSlug: "octoapp", Status: "completed", Conclusion: "neutral", Runs: 1}) {
		t.Errorf("CheckSuites = %+v, %v", suites, err)
	}
	reviews, err := c.Reviews(ctx, "1", r, 1347)
	if err != nil || reviews.Approvals != 1 || len(reviews.ChangesRequested) != 0 {
		t.Errorf("Reviews = %+v, %v", reviews, err)
	}
	res, err := c.CheckResults(ctx, "1", r, "6dcb09b5b57875f334f61aebed695e2e4193db5e")
	if err != nil {
		t.Fatal(err)
	}
	want := []forge.CheckResult{
		{Name: "mighty_readme", Source: "check_run", Status: "completed", Conclusion: "neutral", At: time.Date(2018, 5, 4, 1, 14, 52, 0, time.UTC), AppID: 1},
		{Name: "continuous-integration/jenkins", Source: "status", Status: "completed", Conclusion: "success", At: time.Date(2012, 7, 20, 1, 19, 13, 0, time.UTC)},
		{Name: "security/brakeman", Source: "status", Status: "completed", Conclusion: "success", At: time.Date(2012, 8, 20, 1, 19, 13, 0, time.UTC)},
	}
	if len(res) != len(want) {
		t.Fatalf("CheckResults = %+v", res)
	}
	for i := range want {
		if res[i].Name != want[i].Name || res[i].Source != want[i].Source || res[i].Status != want[i].Status ||
			res[i].Conclusion != want[i].Conclusion || !res[i].At.Equal(want[i].At) || res[i].AppID != want[i].AppID {
			t.Errorf("result %d = %+v, want %+v", i, res[i], want[i])
		}
	}
	if v := forge.EvaluateGate(forge.Required{}, res, nil); v.Result != forge.GateSuccess {
		t.Errorf("gate of the examples = %+v, want success (neutral counts)", v)
	}

	sha, err := c.Merge(ctx, "1", r, 1347, "6dcb09b5b57875f334f61aebed695e2e4193db5e", "merge")
	if err != nil || sha != "6dcb09b5b57875f334f61aebed695e2e4193db5e" {
		t.Errorf("Merge = %q, %v", sha, err)
	}
	if _, err := c.Merge(ctx, "1", r, 1, "x", "merge"); !forge.IsNotMergeable(err) {
		t.Errorf("405 example: %v", err)
	}
	if _, err := c.Merge(ctx, "1", r, 2, "x", "merge"); !forge.IsHeadModified(err) {
		t.Errorf("409 example: %v", err)
	}
	if err := c.UpdateBranch(ctx, "1", r, 1347, "6dcb09b5b57875f334f61aebed695e2e4193db5e"); err != nil {
		t.Errorf("UpdateBranch (202 example): %v", err)
	}
	if id, err := c.CreateCheckRun(ctx, "1", r, "ce587453ced02b1526dfb4cb910479d431683101", forge.CheckRun{Conclusion: "success"}); err != nil || id != 4 {
		t.Errorf("CreateCheckRun = %d, %v", id, err)
	}
	repos, err := c.ListInstallationRepos(ctx, "1")
	if err != nil || !slices.Equal(repos, []string{"octocat/Hello-World"}) {
		t.Errorf("ListInstallationRepos = %v, %v", repos, err)
	}
}
