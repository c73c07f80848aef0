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
		"private":     false,
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

func (s *Server) branchRefJSON(rp *repo, ref, sha string) obj {
	owner, _, _ := strings.Cut(rp.fullName, "/")
	return obj{
		"label": owner + ":" + ref,
		"ref":   ref,
		"sha":   sha,
		"user":  s.userJSON(owner),
		"repo":  s.repoJSON(rp, false),
	}
}

// prJSON is a pull request; full adds the fields only "get a pull request"
// returns (merged, mergeable, mergeable_state...).
func (s *Server) prJSON(rp *repo, pr *PR, full bool) obj {
	id := rp.id*100000 + int64(pr.Number)
	var autoMerge any
	if pr.AutoMerge {
		autoMerge = obj{"enabled_by": s.userJSON(pr.Author), "merge_method": "merge", "commit_title": pr.Title, "commit_message": ""}
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
		"head":                s.branchRefJSON(rp, pr.HeadRef, pr.HeadSHA),
		"base":                s.branchRefJSON(rp, pr.BaseRef, rp.branches[pr.BaseRef]),
		"author_association":  "CONTRIBUTOR",
		"auto_merge":          autoMerge,
		"draft":               pr.Draft,
		"requested_reviewers": []obj{},
	}
	if full {
		var mergedBy any
		if pr.Merged {
			mergedBy = s.userJSON("mergegate[bot]")
		}
		var mergeable any = !pr.Unmergeable
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
		o["maintainer_can_modify"] = false
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
		"check_suite":   obj{"id": cr.ID},
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

func (s *Server) requiredChecksJSON(rp *repo, branch string, rc *requiredChecks) obj {
	base := s.apiURL("repos/%s/branches/%s/protection/required_status_checks", rp.fullName, branch)
	contexts := rc.contexts
	if contexts == nil {
		contexts = []string{}
	}
	return obj{
		"url":          base,
		"strict":       rc.strict,
		"contexts":     contexts,
		"contexts_url": base + "/contexts",
	}
}
