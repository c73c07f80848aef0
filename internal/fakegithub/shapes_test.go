package fakegithub_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// GitHub's own examples (MIT, see testdata/github-rest/NOTICE.md).
func fixture(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-rest", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}

// subShape reports every field of fake that GitHub's example lacks or types
// differently. null on either side matches anything; an array is compared
// element by element with the example's first element.
func subShape(t *testing.T, path string, fake, example any) {
	t.Helper()
	if fake == nil || example == nil {
		return
	}
	switch f := fake.(type) {
	case map[string]any:
		ex, ok := example.(map[string]any)
		if !ok {
			t.Errorf("%s: fake sends an object, GitHub %T", path, example)
			return
		}
		if strings.HasSuffix(path, ".permissions") {
			return // a map keyed by permission name, not a fixed shape
		}
		for k, v := range f {
			ev, ok := ex[k]
			if !ok {
				t.Errorf("%s.%s: not in GitHub's example", path, k)
				continue
			}
			subShape(t, path+"."+k, v, ev)
		}
	case []any:
		ex, ok := example.([]any)
		if !ok {
			t.Errorf("%s: fake sends an array, GitHub %T", path, example)
			return
		}
		if len(ex) == 0 {
			return
		}
		for i, v := range f {
			subShape(t, fmt.Sprintf("%s[%d]", path, i), v, ex[0])
		}
	default:
		if fmt.Sprintf("%T", fake) != fmt.Sprintf("%T", example) {
			t.Errorf("%s: fake sends %T (%v), GitHub %T", path, fake, fake, example)
		}
	}
}

// has fails unless every dotted path exists (not null) in v; through an
// array it is enough that one element has the rest of the path.
func has(t *testing.T, what string, v any, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if !lookup(v, strings.Split(p, ".")) {
			t.Errorf("%s: field %s missing", what, p)
		}
	}
}

func lookup(v any, keys []string) bool {
	if arr, ok := v.([]any); ok {
		for _, el := range arr {
			if lookup(el, keys) {
				return true
			}
		}
		return false
	}
	if len(keys) == 0 {
		return v != nil
	}
	m, _ := v.(map[string]any)
	return m != nil && lookup(m[keys[0]], keys[1:])
}

// withoutChecks checks and removes required_status_checks.checks, the
// {context, app_id} list GitHub's schema (status-check-policy) documents
// but its 23.0.2 example leaves out.
func withoutChecks(t *testing.T, path string, v any) any {
	t.Helper()
	m := v.(map[string]any)
	checks, ok := m["checks"].([]any)
	if !ok {
		t.Errorf("%s: no checks array", path)
		return v
	}
	for _, c := range checks {
		ch := c.(map[string]any)
		if _, ok := ch["context"].(string); !ok {
			t.Errorf("%s.checks: context %v", path, ch["context"])
		}
		if id := ch["app_id"]; id != nil {
			if _, ok := id.(float64); !ok {
				t.Errorf("%s.checks: app_id %v", path, id)
			}
		}
	}
	delete(m, "checks")
	return m
}

func TestShapesMatchGitHubExamples(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1", Labels: []string{"automerge"}, AutoMerge: true})
	s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "h2"})
	s.SetRequired("octo/r", "main", []string{"ci"}, true)
	s.SetRulesetRequired("octo/r", "main", []string{"lint"}, false)
	s.SetCheckRun("octo/r", "h1", "ci", "completed", "success")
	s.SetCheckRun("octo/r", "h1", "lint", "in_progress", "")
	s.SetStatus("octo/r", "h1", "legacy", "success")
	c := newClient(t, s)

	// The token answer (already used by newClient).
	_, _, tok := c.do("POST", "app/installations/"+tenant+"/access_tokens", "Bearer "+appJWT(t, s.PrivateKeyPEM(), s.AppID(), 9*60e9), nil, nil)
	subShape(t, "token", tok, fixture(t, "apps_create-installation-access-token.201.json"))
	has(t, "token", tok, "token", "expires_at")

	gets := []struct {
		path, example string
		required      []string
	}{
		{"installation/repositories", "apps_list-repos-accessible-to-installation.200.json", []string{"total_count", "repositories.full_name"}},
		{"rate_limit", "rate-limit_get.200.json", []string{"rate.remaining", "resources.core.reset"}},
		{"repos/octo/r/pulls", "pulls_list.200.json", []string{"number", "state", "draft", "head.sha", "head.ref", "base.ref", "user.login", "labels.name", "auto_merge", "html_url", "created_at"}},
		{"repos/octo/r/pulls/1", "pulls_get.200.json", []string{"number", "state", "draft", "merged", "mergeable", "mergeable_state", "head.sha", "base.ref", "labels.name", "auto_merge.merge_method"}},
		{"repos/octo/r/branches/main/protection", "repos_get-branch-protection.200.json", []string{"required_status_checks.contexts"}},
		{"repos/octo/r/branches/main/protection/required_status_checks", "repos_get-status-checks-protection.200.json", []string{"strict", "contexts"}},
		{"repos/octo/r/commits/h1/check-runs", "checks_list-for-ref.200.json", []string{"total_count", "check_runs.name", "check_runs.status", "check_runs.conclusion", "check_runs.head_sha", "check_runs.app.id"}},
		{"repos/octo/r/commits/h1/status", "repos_get-combined-status-for-ref.200.json", []string{"state", "statuses.context", "statuses.state", "total_count"}},
	}
	for _, g := range gets {
		st, v := c.get(g.path)
		if st != 200 {
			t.Errorf("GET %s: %d", g.path, st)
			continue
		}
		ex := fixture(t, g.example)
		has(t, g.path, v, g.required...)
		if g.example == "repos_get-branch-protection.200.json" {
			// GitHub's protection example omits "strict"; check the
			// required_status_checks object against its own example.
			obj := v.(map[string]any)
			subShape(t, g.path+".required_status_checks", withoutChecks(t, g.path, obj["required_status_checks"]), fixture(t, "repos_get-status-checks-protection.200.json"))
			delete(obj, "required_status_checks")
		}
		if g.example == "repos_get-status-checks-protection.200.json" {
			v = withoutChecks(t, g.path, v)
		}
		subShape(t, g.path, v, ex)
	}

	// Rules: GitHub's example shows other rule types, so only the rule
	// envelope is compared; parameters follow go-github's
	// RequiredStatusChecksRuleParameters (decoded in forge's tests).
	_, rules := c.get("repos/octo/r/rules/branches/main")
	for _, r := range rules.([]any) {
		rule := r.(map[string]any)
		params := rule["parameters"]
		delete(rule, "parameters")
		subShape(t, "rules", rule, fixture(t, "repos_get-branch-rules.200.json").([]any)[0])
		has(t, "rules", params, "required_status_checks.context", "strict_required_status_checks_policy")
	}

	s.SetCheckRun("octo/r", "h1", "lint", "completed", "neutral")
	writes := []struct {
		method, path string
		body         any
		status       int
		example      string
	}{
		{"POST", "repos/octo/r/issues/1/comments", map[string]string{"body": "hello"}, 201, "issues_create-comment.201.json"},
		{"POST", "repos/octo/r/check-runs", map[string]any{"name": "mergegate", "head_sha": "h1", "status": "completed", "conclusion": "success", "output": map[string]string{"title": "t", "summary": "s"}}, 201, "checks_create.201.example-of-completed-conclusion.json"},
		{"PUT", "repos/octo/r/pulls/2/update-branch", map[string]string{}, 422, ""}, // not behind
		{"PUT", "repos/octo/r/pulls/1/merge", map[string]string{"sha": "h1"}, 200, "pulls_merge.200.json"},
	}
	for _, w := range writes {
		st, _, v := c.do(w.method, w.path, "token "+c.token, w.body, nil)
		if st != w.status {
			t.Errorf("%s %s: %d %v, want %d", w.method, w.path, st, v, w.status)
			continue
		}
		if w.example != "" {
			subShape(t, w.method+" "+w.path, v, fixture(t, w.example))
		}
	}
	s.SetBehind("octo/r", 2, true)
	if st, _, v := c.do("PUT", "repos/octo/r/pulls/2/update-branch", "token "+c.token, map[string]string{}, nil); st != 202 {
		t.Errorf("update-branch: %d", st)
	} else {
		subShape(t, "update-branch", v, fixture(t, "pulls_update-branch.202.json"))
	}

	// Errors carry GitHub's exact messages.
	s.AddPR("octo/r", fakegithub.PR{Number: 3, HeadSHA: "h3"})
	s.SetHead("octo/r", 3, "h3-pushed")
	_, _, v409 := c.do("PUT", "repos/octo/r/pulls/3/merge", "token "+c.token, map[string]string{"sha": "h3"}, nil)
	s.SetMergeable("octo/r", 3, false)
	_, _, v405 := c.do("PUT", "repos/octo/r/pulls/3/merge", "token "+c.token, map[string]string{"sha": "h3-pushed"}, nil)
	for _, e := range []struct {
		got     any
		example string
	}{{v409, "pulls_merge.409.json"}, {v405, "pulls_merge.405.json"}} {
		want := fixture(t, e.example).(map[string]any)["message"]
		if got := e.got.(map[string]any)["message"]; got != want {
			t.Errorf("%s: message %q, want %q", e.example, got, want)
		}
	}
}

// The endpoints of the branch rules, reviews, suites and merge methods.
func TestRuleAndSuiteShapesMatchGitHubExamples(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1", Author: "alice", Fork: true, MaintainerCanModify: true})
	s.SetRequired("octo/r", "main", []string{"ci"}, true)
	s.SetRequiredApp("octo/r", "main", "ci", 77)
	s.SetRequiredReviews("octo/r", "main", 2, true)
	s.SetLinearHistory("octo/r", "main", true)
	s.SetPushRestricted("octo/r", "main", true)
	s.SetRulesetReviews("octo/r", "main", 1, false)
	s.SetRulesetLinearHistory("octo/r", "main", true)
	s.SetMergeQueue("octo/r", "main", true)
	s.SetCheckRun("octo/r", "h1", "ci", "completed", "success")
	s.AddCheckSuite("octo/r", "h1", 99, "dependabot")
	s.AddReview("octo/r", 1, "bob", "APPROVED")
	c := newClient(t, s)

	_, prot := c.get("repos/octo/r/branches/main/protection")
	p := prot.(map[string]any)
	has(t, "protection", p, "required_pull_request_reviews.required_approving_review_count", "required_pull_request_reviews.require_code_owner_reviews",
		"required_linear_history.enabled", "required_conversation_resolution.enabled", "restrictions.apps_url", "required_status_checks.checks.app_id")
	subShape(t, "protection.required_status_checks", withoutChecks(t, "protection", p["required_status_checks"]), fixture(t, "repos_get-status-checks-protection.200.json"))
	delete(p, "required_status_checks")
	subShape(t, "protection", p, fixture(t, "repos_get-branch-protection.200.json"))

	// Rule envelopes against GitHub's example; parameters by the names
	// GitHub's schema (and go-github) give them.
	_, rules := c.get("repos/octo/r/rules/branches/main")
	types := map[string]any{}
	for _, r := range rules.([]any) {
		rule := r.(map[string]any)
		types[rule["type"].(string)] = rule["parameters"]
		delete(rule, "parameters")
		subShape(t, "rules", rule, fixture(t, "repos_get-branch-rules.200.json").([]any)[0])
	}
	has(t, "pull_request rule", types["pull_request"], "required_approving_review_count", "require_code_owner_review", "required_review_thread_resolution")
	has(t, "merge_queue rule", types["merge_queue"], "merge_method", "grouping_strategy")
	if _, ok := types["required_linear_history"]; !ok {
		t.Errorf("rules %v: no required_linear_history", types)
	}

	_, suites := c.get("repos/octo/r/commits/h1/check-suites")
	has(t, "suites", suites, "total_count", "check_suites.app.id", "check_suites.app.slug", "check_suites.status", "check_suites.latest_check_runs_count")
	subShape(t, "suites", suites, fixture(t, "checks_list-suites-for-ref.200.json"))

	_, reviews := c.get("repos/octo/r/pulls/1/reviews")
	has(t, "reviews", reviews, "user.login", "state", "submitted_at", "commit_id")
	subShape(t, "reviews", reviews, fixture(t, "pulls_list-reviews.200.json"))

	// GET /repos/{o}/{r} has no example of its own here: GitHub's full
	// repository is the one of a pull request's base.repo.
	pullEx := fixture(t, "pulls_get.200.json").(map[string]any)
	_, rp := c.get("repos/octo/r")
	has(t, "repo", rp, "allow_merge_commit", "allow_squash_merge", "allow_rebase_merge", "full_name")
	subShape(t, "repo", rp, pullEx["base"].(map[string]any)["repo"])

	s.SetMergeableUnknownReads(0)
	_, pr := c.get("repos/octo/r/pulls/1")
	has(t, "fork pull", pr, "head.repo.full_name", "base.repo.allow_squash_merge", "maintainer_can_modify")
	subShape(t, "fork pull", pr, pullEx)
	if m := pr.(map[string]any); m["head"].(map[string]any)["repo"].(map[string]any)["full_name"] != "alice/r" || m["maintainer_can_modify"] != true {
		t.Errorf("fork pull: head %v, maintainer_can_modify %v", m["head"], m["maintainer_can_modify"])
	}
}
