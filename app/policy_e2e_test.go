package app

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/policy"
)

// postJSON posts body to the admin listener and decodes the answer.
func postJSON(t *testing.T, u string, body any, v any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(u, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("POST %s: %v (%s)", u, err, raw)
		}
	}
	return resp.StatusCode
}

// pushPolicy is a push to the default branch that modified the policy file.
func (h *harness) pushPolicy() {
	h.t.Helper()
	h.mustSend("push", h.fixture("push/with-new-branch.payload.json", func(m map[string]any) {
		m["ref"] = "refs/heads/" + testBase
		m["after"] = "1111111111111111111111111111111111111111"
		obj(m, "repository")["default_branch"] = testBase
		obj(m, "repository")["full_name"] = testRepo
		m["commits"] = []any{map[string]any{"id": "c1", "added": []any{}, "removed": []any{}, "modified": []any{policy.Path}}}
	}))
}

func (h *harness) lastTitle(sha string) string {
	title := ""
	for _, cr := range h.gh.CheckRuns() {
		if cr.HeadSHA == sha {
			title = cr.Title
		}
	}
	return title
}

// The file, end to end, through signed deliveries: its merge method and
// blocking label rule; a push that breaks it keeps the last good policy
// and every check run, GET /queue and the dashboard say where; freeze and
// thaw from the admin API, with who and why in the audit log.
func TestPolicyFileEndToEnd(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "merge_method: rebase\nblocking_labels: [do-not-merge]\n")
	h.pushPolicy() // the file is added
	const sha1, sha2, sha3 = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2", "c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3c3"
	h.label(1, sha1)
	h.pass(sha1)
	h.eventually("#1 merged", func() bool { return len(h.merges()) == 1 })
	if m := h.merges()[0]; m.Method != "rebase" {
		t.Errorf("#1 merged with %s, want rebase (the file's; --merge-method is squash)", m.Method)
	}

	// A typo pushed to the default branch: the last good policy stays.
	h.gh.SetFile(testRepo, policy.Path, "merge_method: rebase\nblocking_labels: [do-not-merge]\nfreeze: true\n")
	h.pushPolicy()
	h.label(2, sha2)
	h.settle()
	if got := h.lastTitle(sha2); !strings.HasSuffix(got, "· .github/mergegate.yml:3 has a problem") {
		t.Errorf("#2's check run = %q", got)
	}
	var qv QueueView
	getJSON(t, h.admin+"/queue?tenant="+testTenant+"&repo="+url.QueryEscape(testRepo), &qv)
	if qv.Policy == nil || len(qv.Policy.Problems) != 1 || qv.Policy.Problems[0].Line != 3 ||
		qv.Policy.Problems[0].Msg != `unknown key "freeze" (did you mean "frozen"?)` || qv.Policy.Source != policy.SourceRepo {
		t.Fatalf("GET /queue policy = %+v", qv.Policy)
	}
	var rv RepoView
	getJSON(t, h.admin+"/repos/"+testTenant+"/"+testRepo+".json", &rv)
	if rv.Policy == nil || len(rv.Policy.Problems) != 1 {
		t.Errorf("dashboard policy = %+v", rv.Policy)
	}
	page, _ := http.Get(h.admin + "/repos/" + testTenant + "/" + testRepo)
	html, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if !strings.Contains(string(html), "Codertocat/Hello-World:.github/mergegate.yml:3:1: unknown key") {
		t.Errorf("the dashboard page does not show the problem")
	}
	if n := strings.Count(h.logBuf.String(), "policy file has problems"); n != 1 {
		t.Errorf("logged %d times, want once", n)
	}

	// Frozen from the admin API: #2 passes but does not merge.
	var ans map[string]any
	if code := postJSON(t, h.admin+"/freeze", map[string]string{"tenant": testTenant, "repo": testRepo, "by": "alice", "message": "release Friday"}, &ans); code != http.StatusOK {
		t.Fatalf("POST /freeze: %d %v", code, ans)
	}
	if code := postJSON(t, h.admin+"/freeze", map[string]string{"tenant": testTenant, "repo": testRepo, "by": "alice"}, &ans); code != http.StatusBadRequest || ans["field"] != "message" {
		t.Errorf("POST /freeze without a message: %d %v", code, ans)
	}
	if code := postJSON(t, h.admin+"/freeze", map[string]string{"tenant": testTenant, "repo": testRepo, "by": "alice", "message": strings.Repeat("m", 1001)}, &ans); code != http.StatusBadRequest || ans["field"] != "message" {
		t.Errorf("POST /freeze with a 1001-byte message: %d %v", code, ans)
	}
	h.pass(sha2)
	h.settle()
	if len(h.merges()) != 1 {
		t.Fatalf("a frozen queue merged: %+v", h.merges())
	}
	if got := h.lastTitle(sha2); !strings.HasPrefix(got, "frozen: release Friday · First in line for master") {
		t.Errorf("#2's check run while frozen = %q", got)
	}
	if code := postJSON(t, h.admin+"/thaw", map[string]string{"tenant": testTenant, "repo": testRepo, "by": "bob", "message": "released"}, &ans); code != http.StatusOK {
		t.Fatalf("POST /thaw: %d %v", code, ans)
	}
	h.eventually("#2 merged once thawed", func() bool { return len(h.merges()) == 2 })
	if m := h.merges()[1]; m.Method != "rebase" {
		t.Errorf("#2 merged with %s, want rebase (the last good policy)", m.Method)
	}
	getJSON(t, h.admin+"/queue?tenant="+testTenant+"&repo="+url.QueryEscape(testRepo), &qv)
	var said []string
	for _, a := range qv.Audit {
		if a.Action == "freeze" || a.Action == "thaw" {
			said = append(said, a.Reason)
		}
	}
	if len(said) != 2 || said[0] != "repository frozen by alice: release Friday" || said[1] != "repository thawed by bob: released" {
		t.Errorf("audit = %q", said)
	}

	// Fixed and pushed: the problem is gone, a blocking label holds #3
	// back without stopping the queue.
	h.gh.SetFile(testRepo, policy.Path, "merge_method: squash\nblocking_labels: [do-not-merge]\n")
	h.pushPolicy()
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 3, HeadSHA: sha3, BaseRef: testBase, Labels: []string{"automerge", "do-not-merge"}})
	h.mustSend("pull_request", h.prPayload("labeled", 3, sha3, "automerge", "do-not-merge"))
	h.pass(sha3)
	h.settle()
	if len(h.merges()) != 2 {
		t.Fatalf("#3 with do-not-merge merged: %+v", h.merges())
	}
	if got := h.lastTitle(sha3); !strings.Contains(got, `Waits, the label "do-not-merge" keeps it from merging`) {
		t.Errorf("#3's check run = %q", got)
	}
	h.gh.SetLabels(testRepo, 3, "automerge")
	h.mustSend("pull_request", h.fixture("pull_request/unlabeled.payload.json", func(m map[string]any) {
		var pm map[string]any
		json.Unmarshal(h.prPayload("unlabeled", 3, sha3, "automerge"), &pm) //nolint:errcheck
		for k, v := range pm {
			m[k] = v
		}
		m["label"] = map[string]any{"name": "do-not-merge"}
	}))
	h.eventually("#3 merged once the label is removed", func() bool { return len(h.merges()) == 3 })
	if m := h.merges()[2]; m.Method != "squash" {
		t.Errorf("#3 merged with %s, want squash (the fixed file)", m.Method)
	}
}

// The dashboard's freeze and thaw forms post to the admin API (same
// origin) and come back to the repository's page.
func TestDashboardFreezeForms(t *testing.T) {
	h := newHarness(t)
	h.label(1, "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1")
	h.settle()
	page := h.admin + "/repos/" + testTenant + "/" + testRepo
	resp, _ := http.Get(page)
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(html), `action="/freeze"`) {
		t.Fatal("the repository page has no freeze form")
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path string, form url.Values) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, h.admin+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin") // as the browser sends it from the page
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp = post("/freeze", url.Values{"tenant": {testTenant}, "repo": {testRepo}, "branch": {"master"}, "message": {"code freeze"}, "by": {"carol"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/repos/"+testTenant+"/"+testRepo {
		t.Fatalf("freeze form: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if f := h.app.policies.Load().Freezes(testKey); len(f) != 1 || f[0].Branch != "master" || f[0].By != "carol" {
		t.Fatalf("freezes = %+v", f)
	}
	// From another site: refused.
	req, _ := http.NewRequest(http.MethodPost, h.admin+"/thaw", strings.NewReader(url.Values{"tenant": {testTenant}, "repo": {testRepo}, "branch": {"master"}, "by": {"eve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := noRedirect.Do(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site thaw answered %d", resp.StatusCode)
	}
	post("/thaw", url.Values{"tenant": {testTenant}, "repo": {testRepo}, "branch": {"master"}, "by": {"carol"}})
	if f := h.app.policies.Load().Freezes(testKey); len(f) != 0 {
		t.Errorf("after the thaw form: %+v", f)
	}
}

// As a new user would try it: two repositories under one installation,
// one squash-only... here rebase-only, with do-not-merge and priorities in
// its file, the other on the defaults (--merge-method squash); each
// follows its own, and a typo in one file shows on its pull requests
// without stopping its queue.
func TestTwoRepositoriesTwoPolicies(t *testing.T) {
	h := newHarness(t)
	const strict = "Codertocat/strict"
	h.gh.AddRepo(testTenant, strict, testBase)
	h.gh.SetFile(strict, policy.Path, "merge_method: rebase\nblocking_labels: [do-not-merge]\npriority_labels: [urgent]\n")
	sha := func(repo string, n int) string { return fakegithub.DeriveSHA(repo, "pr", string(rune('0'+n))) }
	open := func(repo string, n int, labels ...string) {
		h.gh.AddPR(repo, fakegithub.PR{Number: n, HeadSHA: sha(repo, n), BaseRef: testBase, Labels: append([]string{"automerge"}, labels...)})
		h.mustSend("pull_request", h.prPayloadIn(repo, "labeled", n, sha(repo, n), append([]string{"automerge"}, labels...)...))
	}
	green := func(repo string, n int) {
		h.gh.SetCheckRun(repo, sha(repo, n), "ci/build", "completed", "success")
		h.mustSend("check_suite", h.fixture("check_suite/completed.payload.json", func(m map[string]any) {
			obj(m, "check_suite")["head_sha"] = sha(repo, n)
			obj(m, "check_suite")["pull_requests"] = []any{}
			obj(m, "repository")["full_name"] = repo
		}))
	}
	open(strict, 1, "do-not-merge")
	open(strict, 2)
	open(strict, 3, "urgent")
	open(testRepo, 1, "do-not-merge")
	// Every pull request is in its queue before any check passes: else a
	// sync between the joins can find #2 green with #3 not yet queued.
	h.settle()
	for _, n := range []int{1, 2, 3} {
		green(strict, n)
	}
	green(testRepo, 1)
	h.eventually("three merges", func() bool { return len(h.merges()) == 3 })
	h.settle()
	var order []string
	for _, m := range h.merges() {
		order = append(order, m.Repo+"#"+string(rune('0'+m.PRNumber))+":"+m.Method)
	}
	want := map[string]bool{strict + "#3:rebase": true, strict + "#2:rebase": true, testRepo + "#1:squash": true}
	for _, o := range order {
		if !want[o] {
			t.Errorf("merged %s; want %v", o, want)
		}
	}
	var strictOrder []int
	for _, m := range h.merges() {
		if m.Repo == strict {
			strictOrder = append(strictOrder, m.PRNumber)
		}
	}
	if len(strictOrder) != 2 || strictOrder[0] != 3 {
		t.Errorf("%s merged %v, want #3 (urgent) first, #1 held", strict, strictOrder)
	}

	// A typo in the strict repository's file: its queue goes on under the
	// last good policy, and its pull requests say where the problem is.
	h.gh.SetFile(strict, policy.Path, "merge_method: rebase\nblocking_labels: do-not-merge\npriority_labels: [urgent]\n")
	h.mustSend("push", h.fixture("push/with-new-branch.payload.json", func(m map[string]any) {
		m["ref"], m["after"] = "refs/heads/"+testBase, "2222222222222222222222222222222222222222"
		obj(m, "repository")["default_branch"], obj(m, "repository")["full_name"] = testBase, strict
		m["commits"] = []any{map[string]any{"id": "c1", "added": []any{}, "removed": []any{}, "modified": []any{policy.Path}}}
	}))
	open(strict, 4)
	h.settle()
	if got := h.lastTitle(sha(strict, 4)); !strings.HasSuffix(got, "· .github/mergegate.yml:2 has a problem") {
		t.Errorf("%s#4's check run = %q", strict, got)
	}
	green(strict, 4)
	h.eventually("#4 merged under the last good policy", func() bool { return len(h.merges()) == 4 })
	if m := h.merges()[3]; m.Repo != strict || m.Method != "rebase" {
		t.Errorf("4th merge = %+v, want %s#4 with rebase", m, strict)
	}
	if p := h.app.policies.Load().Get(testKey); p.Source != policy.SourceDefaults || len(p.Problems) != 0 {
		t.Errorf("the other repository's policy = %+v", p)
	}
}
