package fakegithub

import (
	"fmt"
	"strings"
	"time"
)

// JSON builders. Every field here exists, with the same JSON type, in
// GitHub's examples (testdata/github-rest); shapes_test.go checks it. The
// fake sends the fields go-github and mergegate read plus their usual
// neighbours, not GitHub's every URL template.

const htmlBase = "https://github.com/"

type obj = map[string]any

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func nodeID(kind string, id int64) string { return fmt.Sprintf("%s_%d", kind, id) }

func (s *Server) apiURL(format string, args ...any) string {
	return s.URL() + fmt.Sprintf(format, args...)
}

func (s *Server) userJSON(login string) obj {
	id := int64(len(login)) // stable, not meaningful
	for _, c := range login {
		id = id*31 + int64(c)
	}
	if id < 0 {
		id = -id
	}
	return obj{
		"login":      login,
		"id":         id,
		"node_id":    nodeID("U", id),
		"avatar_url": htmlBase + login + ".png",
		"url":        s.apiURL("users/%s", login),
		"html_url":   htmlBase + login,
		"type":       "User",
		"site_admin": false,
	}
}

// botJSON is the App's bot user, as whom an installation token writes
// (GitHub: login "<app-slug>[bot]", type "Bot").
func (s *Server) botJSON() obj {
	u := s.userJSON(AppBotLogin)
	u["type"] = "Bot"
	return u
}

// repoJSON is a repository; minimal is GitHub's "minimal-repository" (as
// in the combined status), without default_branch and flags.
func (s *Server) repoJSON(rp *repo, minimal bool) obj {
	owner, name, _ := strings.Cut(rp.fullName, "/")
	o := obj{
		"id":          rp.id,
		"node_id":     nodeID("R", rp.id),
		"name":        name,
		"full_name":   rp.fullName,
		"owner":       s.userJSON(owner),
		"private":     rp.private,
		"html_url":    htmlBase + rp.fullName,
		"description": "",
		"fork":        false,
		"url":         s.apiURL("repos/%s", rp.fullName),
	}
	if !minimal {
		o["default_branch"] = rp.defaultBranch
		o["archived"] = false
		o["disabled"] = false
	}
	return o
}

func (s *Server) labelsJSON(rp *repo, labels []string) []obj {
	out := []obj{}
	for i, l := range labels {
		out = append(out, obj{
			"id":          int64(i + 1),
			"node_id":     nodeID("LA", int64(i+1)),
			"url":         s.apiURL("repos/%s/labels/%s", rp.fullName, l),
			"name":        l,
			"description": "",
			"color":       "ededed",
			"default":     false,
		})
	}
	return out
}

// branchRefJSON is a PR's base (or a same-repository head); withMethods
// adds the repository's merge settings, which GET /pulls/{n} reports.
func (s *Server) branchRefJSON(rp *repo, ref, sha string, withMethods bool) obj {
	owner, _, _ := strings.Cut(rp.fullName, "/")
	r := s.repoJSON(rp, false)
	if withMethods {
		r = s.fullRepoJSON(rp)
	}
	return obj{
		"label": owner + ":" + ref,
		"ref":   ref,
		"sha":   sha,
		"user":  s.userJSON(owner),
		"repo":  r,
	}
}

// headJSON is a PR's head: in the author's fork for a fork PR.
func (s *Server) headJSON(rp *repo, pr *PR, full bool) obj {
	if !pr.Fork {
		return s.branchRefJSON(rp, pr.HeadRef, pr.HeadSHA, full)
	}
	return obj{
		"label": pr.Author + ":" + pr.HeadRef,
		"ref":   pr.HeadRef,
		"sha":   pr.HeadSHA,
		"user":  s.userJSON(pr.Author),
		"repo":  s.forkJSON(rp, pr.Author),
	}
}

// prJSON is a pull request; full adds the fields only "get a pull request"
// returns (merged, mergeable, mergeable_state...).
func (s *Server) prJSON(rp *repo, pr *PR, full bool) obj {
	id := rp.id*100000 + int64(pr.Number)
	var autoMerge any
	if pr.AutoMerge {
		autoMerge = obj{"enabled_by": s.userJSON(pr.Author), "merge_method": pr.AutoMergeMethod, "commit_title": pr.Title, "commit_message": ""}
	}
	var mergeCommit any
	if pr.MergeCommitSHA != "" {
		mergeCommit = pr.MergeCommitSHA
	}
	o := obj{
		"url":                 s.apiURL("repos/%s/pulls/%d", rp.fullName, pr.Number),
		"id":                  id,
		"node_id":             nodeID("PR", id),
		"html_url":            fmt.Sprintf("%s%s/pull/%d", htmlBase, rp.fullName, pr.Number),
		"issue_url":           s.apiURL("repos/%s/issues/%d", rp.fullName, pr.Number),
		"statuses_url":        s.apiURL("repos/%s/statuses/%s", rp.fullName, pr.HeadSHA),
		"number":              pr.Number,
		"state":               pr.State,
		"locked":              false,
		"title":               pr.Title,
		"user":                s.userJSON(pr.Author),
		"body":                pr.Body,
		"labels":              s.labelsJSON(rp, pr.Labels),
		"created_at":          ts(pr.CreatedAt),
		"updated_at":          ts(pr.UpdatedAt),
		"closed_at":           ts(pr.ClosedAt),
		"merged_at":           ts(pr.MergedAt),
		"merge_commit_sha":    mergeCommit,
		"head":                s.headJSON(rp, pr, full),
		"base":                s.branchRefJSON(rp, pr.BaseRef, rp.branches[pr.BaseRef], full),
		"author_association":  "CONTRIBUTOR",
		"auto_merge":          autoMerge,
		"draft":               pr.Draft,
		"requested_reviewers": []obj{},
	}
	if full {
		var mergedBy any
		if pr.Merged {
			mergedBy = s.botJSON()
		}
		var mergeable any = !pr.Unmergeable && !rp.conflicted(pr)
		if pr.State != "open" {
			mergeable = nil
		}
		o["merged"] = pr.Merged
		o["mergeable"] = mergeable
		o["rebaseable"] = mergeable
		o["mergeable_state"] = rp.mergeableState(pr)
		o["merged_by"] = mergedBy
		o["comments"] = 0
		o["review_comments"] = 0
		o["maintainer_can_modify"] = pr.MaintainerCanModify
		o["commits"] = 1
		o["additions"] = 1
		o["deletions"] = 0
		o["changed_files"] = 1
	}
	return o
}

func (s *Server) appJSON(id int64, slug string) obj {
	return obj{
		"id":           id,
		"slug":         slug,
		"node_id":      nodeID("A", id),
		"owner":        s.userJSON("github"),
		"name":         slug,
		"description":  "",
		"external_url": htmlBase + "apps/" + slug,
		"html_url":     htmlBase + "apps/" + slug,
		"created_at":   "2018-07-30T09:30:17Z",
		"updated_at":   "2019-12-10T19:00:00Z",
		"permissions":  obj{"checks": "write", "metadata": "read"},
		"events":       []string{},
	}
}

func (s *Server) checkRunJSON(rp *repo, cr *checkRun) obj {
	var conclusion any
	if cr.Conclusion != "" {
		conclusion = cr.Conclusion
	}
	var title, summary any
	if cr.Title != "" || cr.Summary != "" {
		title, summary = cr.Title, cr.Summary
	}
	return obj{
		"id":           cr.ID,
		"head_sha":     cr.HeadSHA,
		"node_id":      nodeID("CR", cr.ID),
		"external_id":  "",
		"url":          s.apiURL("repos/%s/check-runs/%d", rp.fullName, cr.ID),
		"html_url":     fmt.Sprintf("%s%s/runs/%d", htmlBase, rp.fullName, cr.ID),
		"details_url":  fmt.Sprintf("%s%s/runs/%d", htmlBase, rp.fullName, cr.ID),
		"status":       cr.Status,
		"conclusion":   conclusion,
		"started_at":   ts(cr.StartedAt),
		"completed_at": ts(cr.CompletedAt),
		"output": obj{
			"title":             title,
			"summary":           summary,
			"text":              nil,
			"annotations_count": 0,
			"annotations_url":   s.apiURL("repos/%s/check-runs/%d/annotations", rp.fullName, cr.ID),
		},
		"name":          cr.Name,
		"check_suite":   obj{"id": s.suiteID(rp, cr.HeadSHA, cr.AppID)},
		"app":           s.appJSON(cr.AppID, cr.AppSlug),
		"pull_requests": []obj{},
	}
}

func (s *Server) statusJSON(rp *repo, st *status) obj {
	return obj{
		"url":         s.apiURL("repos/%s/statuses/%s", rp.fullName, st.SHA),
		"avatar_url":  htmlBase + "ci.png",
		"id":          st.ID,
		"node_id":     nodeID("SC", st.ID),
		"state":       st.State,
		"description": "",
		"target_url":  nil,
		"context":     st.Context,
		"created_at":  ts(st.CreatedAt),
		"updated_at":  ts(st.UpdatedAt),
	}
}

func (s *Server) requiredChecksJSON(rp *repo, branch string, sc *statusChecks) obj {
	base := s.apiURL("repos/%s/branches/%s/protection/required_status_checks", rp.fullName, branch)
	contexts := sc.contexts
	if contexts == nil {
		contexts = []string{}
	}
	checks := []obj{}
	for _, c := range contexts {
		var app any // null: any App (or a status)
		if id, ok := sc.appIDs[c]; ok {
			app = id
		}
		checks = append(checks, obj{"context": c, "app_id": app})
	}
	return obj{
		"url":          base,
		"strict":       sc.strict,
		"contexts":     contexts,
		"checks":       checks,
		"contexts_url": base + "/contexts",
	}
}

// protectionJSON is GET .../branches/{b}/protection: GitHub leaves out
// required_status_checks, required_pull_request_reviews and restrictions
// when they are not set, and reports the toggles as {enabled}.
func (s *Server) protectionJSON(rp *repo, branch string, b *branchRules) obj {
	base := s.apiURL("repos/%s/branches/%s/protection", rp.fullName, branch)
	enabled := func(on bool) obj { return obj{"enabled": on} }
	o := obj{
		"url":                              base,
		"enforce_admins":                   obj{"url": base + "/enforce_admins", "enabled": false},
		"required_linear_history":          enabled(b.linear),
		"allow_force_pushes":               enabled(false),
		"allow_deletions":                  enabled(false),
		"required_conversation_resolution": enabled(b.conversations),
		"lock_branch":                      enabled(false),
		"allow_fork_syncing":               enabled(false),
	}
	if b.checks != nil {
		o["required_status_checks"] = s.requiredChecksJSON(rp, branch, b.checks)
	}
	if b.reviewsOn {
		o["required_pull_request_reviews"] = obj{
			"url":                             base + "/required_pull_request_reviews",
			"dismiss_stale_reviews":           false,
			"require_code_owner_reviews":      b.codeOwners,
			"required_approving_review_count": b.reviews,
			"require_last_push_approval":      false,
		}
	}
	if b.pushRestricted {
		o["restrictions"] = obj{
			"url":       base + "/restrictions",
			"users_url": base + "/restrictions/users",
			"teams_url": base + "/restrictions/teams",
			"apps_url":  base + "/restrictions/apps",
			"users":     []obj{},
			"teams":     []obj{},
			"apps":      []obj{},
		}
	}
	return o
}

// rulesJSON lists the rules of a ruleset as GET .../rules/branches/{b}
// reports them.
func (s *Server) rulesJSON(rp *repo, b *branchRules) []obj {
	rule := func(typ string, params any) obj {
		o := obj{"type": typ, "ruleset_source_type": "Repository", "ruleset_source": rp.fullName, "ruleset_id": b.id}
		if params != nil {
			o["parameters"] = params
		}
		return o
	}
	var rules []obj
	if b.checks != nil {
		checks := []obj{}
		for _, c := range b.checks.contexts {
			ch := obj{"context": c}
			if id, ok := b.checks.appIDs[c]; ok {
				ch["integration_id"] = id
			}
			checks = append(checks, ch)
		}
		rules = append(rules, rule("required_status_checks", obj{
			"required_status_checks":               checks,
			"strict_required_status_checks_policy": b.checks.strict,
		}))
	}
	if b.reviewsOn {
		rules = append(rules, rule("pull_request", obj{
			"dismiss_stale_reviews_on_push":     false,
			"require_code_owner_review":         b.codeOwners,
			"require_last_push_approval":        false,
			"required_approving_review_count":   b.reviews,
			"required_review_thread_resolution": b.conversations,
		}))
	}
	if b.linear {
		rules = append(rules, rule("required_linear_history", nil))
	}
	if b.mergeQueue {
		rules = append(rules, rule("merge_queue", obj{
			"check_response_timeout_minutes":    60,
			"grouping_strategy":                 "ALLGREEN",
			"max_entries_to_build":              5,
			"max_entries_to_merge":              5,
			"merge_method":                      "MERGE",
			"min_entries_to_merge":              1,
			"min_entries_to_merge_wait_minutes": 5,
		}))
	}
	return rules
}

// fullRepoJSON is a repository with the merge settings GitHub shows to an
// App that can push (GET /repos/{o}/{r}, a PR's base.repo).
func (s *Server) fullRepoJSON(rp *repo) obj {
	o := s.repoJSON(rp, false)
	o["allow_merge_commit"] = rp.methods.Merge
	o["allow_squash_merge"] = rp.methods.Squash
	o["allow_rebase_merge"] = rp.methods.Rebase
	return o
}

// forkJSON is the author's fork of rp, the head repository of a fork PR.
func (s *Server) forkJSON(rp *repo, author string) obj {
	_, name, _ := strings.Cut(rp.fullName, "/")
	full := author + "/" + name
	id := rp.id + 500000
	return obj{
		"id":             id,
		"node_id":        nodeID("R", id),
		"name":           name,
		"full_name":      full,
		"owner":          s.userJSON(author),
		"private":        false,
		"html_url":       htmlBase + full,
		"description":    "",
		"fork":           true,
		"url":            s.apiURL("repos/%s", full),
		"default_branch": rp.defaultBranch,
		"archived":       false,
		"disabled":       false,
	}
}

func (s *Server) reviewJSON(rp *repo, pr *PR, rv *review) obj {
	html := fmt.Sprintf("%s%s/pull/%d#pullrequestreview-%d", htmlBase, rp.fullName, pr.Number, rv.id)
	prURL := s.apiURL("repos/%s/pulls/%d", rp.fullName, pr.Number)
	return obj{
		"id":                 rv.id,
		"node_id":            nodeID("PRR", rv.id),
		"user":               s.userJSON(rv.login),
		"body":               "",
		"state":              rv.state,
		"html_url":           html,
		"pull_request_url":   prURL,
		"_links":             obj{"html": obj{"href": html}, "pull_request": obj{"href": prURL}},
		"submitted_at":       ts(rv.submitted),
		"commit_id":          rv.commitID,
		"author_association": "COLLABORATOR",
	}
}
