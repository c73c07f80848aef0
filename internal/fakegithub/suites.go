package fakegithub

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
)

// Check suites: GitHub makes one per (commit, App) as soon as the App
// creates a check run on the commit; AddCheckSuite adds one with no runs
// (GitHub creates suites for every App with checks permission when a
// commit is pushed, and those stay queued forever).

type checkSuite struct {
	id    int64
	sha   string
	appID int64
	slug  string
}

// AddCheckSuite adds a check suite of the App appID (slug) on sha with no
// check runs: status queued, latest_check_runs_count 0.
func (s *Server) AddCheckSuite(fullName, sha string, appID int64, slug string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	rp.suites = append(rp.suites, &checkSuite{id: s.suiteID(rp, sha, appID), sha: sha, appID: appID, slug: slug})
}

// suiteID is the stable id of (sha, App)'s suite. Called with s.mu held.
func (s *Server) suiteID(rp *repo, sha string, appID int64) int64 {
	k := sha + " " + strconv.FormatInt(appID, 10)
	if rp.suiteIDs[k] == 0 {
		rp.suiteIDs[k] = s.newID()
		rp.suiteAt[rp.suiteIDs[k]] = s.now()
	}
	return rp.suiteIDs[k]
}

// suiteView is a suite as the API reports it.
type suiteView struct {
	checkSuite
	status, conclusion string
	runs               int
}

// worstFirst orders conclusions for a suite's: the first one present wins.
var worstFirst = []string{"action_required", "startup_failure", "failure", "timed_out", "cancelled", "stale", "neutral", "skipped", "success"}

// suitesOf lists sha's suites, in order of their ids. Called with s.mu
// held.
func (s *Server) suitesOf(rp *repo, sha string) []suiteView {
	byApp := map[int64]*suiteView{}
	var order []int64
	view := func(appID int64, slug string) *suiteView {
		if v := byApp[appID]; v != nil {
			return v
		}
		v := &suiteView{checkSuite: checkSuite{id: s.suiteID(rp, sha, appID), sha: sha, appID: appID, slug: slug}}
		byApp[appID] = v
		order = append(order, appID)
		return v
	}
	for _, st := range rp.suites {
		if st.sha == sha {
			view(st.appID, st.slug)
		}
	}
	conclusions := map[int64]map[string]bool{}
	for _, cr := range rp.latestRuns(sha) {
		v := view(cr.AppID, cr.AppSlug)
		v.runs++
		if conclusions[cr.AppID] == nil {
			conclusions[cr.AppID] = map[string]bool{}
		}
		conclusions[cr.AppID][cr.Conclusion] = true
		switch {
		case cr.Status != "completed":
			v.status = "in_progress"
		case v.status == "":
			v.status = "completed"
		}
	}
	out := make([]suiteView, 0, len(order))
	for _, id := range order {
		v := byApp[id]
		switch {
		case v.runs == 0:
			v.status = "queued"
		case v.status == "completed":
			for _, c := range worstFirst {
				if conclusions[id][c] {
					v.conclusion = c
					break
				}
			}
		}
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (s *Server) listCheckSuites(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	sha := rp.resolveRef(r.PathValue("ref"))
	all := s.suitesOf(rp, sha)
	if id := r.URL.Query().Get("app_id"); id != "" {
		var kept []suiteView
		for _, v := range all {
			if strconv.FormatInt(v.appID, 10) == id {
				kept = append(kept, v)
			}
		}
		all = kept
	}
	out := []obj{}
	for _, v := range paginate(w, r, all) {
		out = append(out, s.checkSuiteJSON(rp, v))
	}
	writeJSON(w, http.StatusOK, obj{"total_count": len(all), "check_suites": out})
}

func (s *Server) checkSuiteJSON(rp *repo, v suiteView) obj {
	var conclusion, headBranch any
	if v.conclusion != "" {
		conclusion = v.conclusion
	}
	for b, sha := range rp.branches {
		if sha == v.sha {
			headBranch = b
		}
	}
	for _, pr := range rp.prs {
		if pr.HeadSHA == v.sha {
			headBranch = pr.HeadRef
		}
	}
	at := ts(rp.suiteAt[v.id])
	return obj{
		"id":                      v.id,
		"node_id":                 nodeID("CS", v.id),
		"head_branch":             headBranch,
		"head_sha":                v.sha,
		"status":                  v.status,
		"conclusion":              conclusion,
		"url":                     s.apiURL("repos/%s/check-suites/%d", rp.fullName, v.id),
		"before":                  nil,
		"after":                   v.sha,
		"pull_requests":           []obj{},
		"app":                     s.appJSON(v.appID, v.slug),
		"repository":              s.repoJSON(rp, true),
		"created_at":              at,
		"updated_at":              at,
		"latest_check_runs_count": v.runs,
		"check_runs_url":          fmt.Sprintf("%srepos/%s/check-suites/%d/check-runs", s.URL(), rp.fullName, v.id),
	}
}
