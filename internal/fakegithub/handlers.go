package fakegithub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Handlers run with s.mu held (the middleware holds it) and answer through
// the middleware's buffer.

// repoOf returns the request's repository if the token's installation can
// see it; otherwise it answers 404 like GitHub and returns nil.
func (s *Server) repoOf(w http.ResponseWriter, r *http.Request) *repo {
	rp := s.repos[r.PathValue("owner")+"/"+r.PathValue("repo")]
	if rp == nil || rp.tenant != tenantOf(r) {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil
	}
	return rp
}

func (s *Server) prOf(w http.ResponseWriter, r *http.Request, param string) (*repo, *PR) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return nil, nil
	}
	n, err := strconv.Atoi(r.PathValue(param))
	if err != nil || rp.prs[n] == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil, nil
	}
	return rp, rp.prs[n]
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if r.Body == nil {
		return true
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil && err.Error() != "EOF" {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// paginate applies per_page (default 30, max 100) and page, and sets the
// Link header the way GitHub does.
func paginate[T any](w http.ResponseWriter, r *http.Request, items []T) []T {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	last := max((len(items)+per-1)/per, 1)
	link := func(p int, rel string) string {
		u := url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path}
		qq := r.URL.Query()
		qq.Set("page", strconv.Itoa(p))
		u.RawQuery = qq.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page > 1 {
		links = append(links, link(page-1, "prev"), link(1, "first"))
	}
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	start := min((page-1)*per, len(items))
	end := min(start+per, len(items))
	return items[start:end]
}

func (s *Server) installationRepos(w http.ResponseWriter, r *http.Request) {
	var rps []*repo
	for _, rp := range s.repos {
		if rp.tenant == tenantOf(r) {
			rps = append(rps, rp)
		}
	}
	sort.Slice(rps, func(i, j int) bool { return rps[i].fullName < rps[j].fullName })
	page := paginate(w, r, rps)
	out := []obj{}
	for _, rp := range page {
		out = append(out, s.repoJSON(rp, false))
	}
	writeJSON(w, http.StatusOK, obj{"total_count": len(rps), "repositories": out})
}

func (s *Server) getRateLimit(w http.ResponseWriter, r *http.Request) {
	t := s.rate(tenantOf(r))
	core := obj{"limit": t.limit, "used": t.used, "remaining": max(t.limit-t.used, 0), "reset": t.reset.Unix()}
	writeJSON(w, http.StatusOK, obj{"resources": obj{"core": core}, "rate": core})
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	state := r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	var prs []*PR
	for _, pr := range rp.prs {
		if state == "all" || pr.State == state {
			prs = append(prs, pr)
		}
	}
	// GitHub's default order: newest first.
	sort.Slice(prs, func(i, j int) bool {
		if !prs[i].CreatedAt.Equal(prs[j].CreatedAt) {
			return prs[i].CreatedAt.After(prs[j].CreatedAt)
		}
		return prs[i].Number > prs[j].Number
	})
	out := []obj{}
	for _, pr := range paginate(w, r, prs) {
		out = append(out, s.prJSON(rp, pr, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	o := s.prJSON(rp, pr, true)
	if pr.unknownReads > 0 && pr.State == "open" {
		// GitHub is still computing mergeability after a move.
		pr.unknownReads--
		o["mergeable"], o["rebaseable"], o["mergeable_state"] = nil, nil, "unknown"
	}
	if pr.staleHeadReads > 0 {
		pr.staleHeadReads--
		o["head"].(obj)["sha"] = pr.staleHead
	}
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) getRepo(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	writeJSON(w, http.StatusOK, s.fullRepoJSON(rp))
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	out := []obj{}
	reviews := rp.reviews[pr.Number]
	if rp.staleReviews[pr.Number] > 0 {
		rp.staleReviews[pr.Number]--
		reviews = reviews[:max(len(reviews)-1, 0)]
	}
	for _, rv := range paginate(w, r, reviews) {
		out = append(out, s.reviewJSON(rp, pr, rv))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) mergePull(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	var body struct {
		SHA           string `json:"sha"`
		MergeMethod   string `json:"merge_method"`
		CommitTitle   string `json:"commit_title"`
		CommitMessage string `json:"commit_message"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	method := body.MergeMethod
	if method == "" {
		method = "merge"
	}
	_, strict, _ := rp.required(pr.BaseRef)
	rules := rp.rulesOf(pr.BaseRef)
	switch {
	case method != "merge" && method != "squash" && method != "rebase":
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
	case pr.State != "open":
		writeError(w, http.StatusMethodNotAllowed, MsgNotMergeable)
	case body.SHA != "" && body.SHA != pr.HeadSHA:
		writeError(w, http.StatusConflict, MsgHeadModified)
	case pr.unknownReads > 0 && pr.Behind:
		// GitHub has not worked out the PR's mergeability since its base
		// moved: the merge is refused as if the base had just moved
		// (cli/cli#12748, kubernetes/contrib#141), and GitHub gets on
		// with the computation meanwhile.
		pr.unknownReads--
		writeError(w, http.StatusMethodNotAllowed, MsgBaseModified)
	case pr.Draft:
		writeError(w, http.StatusMethodNotAllowed, MsgDraft)
	case rules.mergeQueue:
		writeError(w, http.StatusMethodNotAllowed, MsgMergeQueue)
	case rules.pushRestricted:
		writeError(w, http.StatusMethodNotAllowed, MsgNotAuthorized)
	case pr.TouchesWorkflows && !s.workflows:
		writeError(w, http.StatusForbidden, fmt.Sprintf(MsgWorkflowsFormat, workflowFile))
	case rp.methodProblem(pr.BaseRef, method) != "":
		writeError(w, http.StatusMethodNotAllowed, rp.methodProblem(pr.BaseRef, method))
	case pr.Unmergeable, rp.conflicted(pr):
		writeError(w, http.StatusMethodNotAllowed, MsgNotMergeable)
	case pr.Behind && strict:
		// GitHub's answer for a head behind a strict base is its generic
		// "not mergeable" (googleapis/repo-automation-bots#304): only the
		// PR's mergeable_state says "behind".
		writeError(w, http.StatusMethodNotAllowed, MsgNotMergeable)
	case rp.reviewProblem(pr) != "":
		writeError(w, http.StatusMethodNotAllowed, rp.reviewProblem(pr))
	case rp.requiredProblem(pr) != "":
		writeError(w, http.StatusMethodNotAllowed, rp.requiredProblem(pr))
	default:
		now := s.now()
		commit := DeriveSHA(pr.HeadSHA, method, "merge")
		pr.State, pr.Merged, pr.MergeCommitSHA = "closed", true, commit
		pr.MergedAt, pr.ClosedAt, pr.UpdatedAt = now, now, now
		title := body.CommitTitle
		if title == "" {
			title = fmt.Sprintf("Merge pull request #%d from %s", pr.Number, pr.HeadRef)
		}
		s.commitPRMerge(rp, pr, method, commit, strings.TrimSpace(title+"\n\n"+body.CommitMessage))
		s.wroteRef(rp, pr.BaseRef)
		s.moveBase(rp, pr.BaseRef, commit, pr)
		s.rec.merges = append(s.rec.merges, Merge{Repo: rp.fullName, PRNumber: pr.Number, SHA: pr.HeadSHA, Method: method, MergeCommitSHA: commit,
			Title: body.CommitTitle, Message: body.CommitMessage, Seq: s.rec.nextSeq()})
		writeJSON(w, http.StatusOK, obj{"sha": commit, "merged": true, "message": "Pull Request successfully merged"})
	}
}

// workflowFile is the workflow a PR with TouchesWorkflows changes, as
// GitHub's 403 names it.
const workflowFile = ".github/workflows/ci.yml"

func (s *Server) updateBranch(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	var body struct {
		ExpectedHeadSHA string `json:"expected_head_sha"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	status, msg := s.branchUpdate(rp, pr, body.ExpectedHeadSHA, "update")
	if status != 0 {
		writeError(w, status, msg)
		return
	}
	writeJSON(w, http.StatusAccepted, obj{
		"message": "Updating pull request branch.",
		"url":     fmt.Sprintf("%s%s/pull/%d", htmlBase, rp.fullName, pr.Number),
	})
}

// branchUpdate is update-branch's and updatePullRequestBranch's logic:
// GitHub's refusal (status and message), or 0 after giving the PR a new
// head. kind is "update" (the base merged in) or "rebase".
func (s *Server) branchUpdate(rp *repo, pr *PR, expectedHeadSHA, kind string) (int, string) {
	switch {
	case pr.State != "open":
		return http.StatusUnprocessableEntity, MsgUpdateClosed
	case expectedHeadSHA != "" && expectedHeadSHA != pr.HeadSHA:
		return http.StatusUnprocessableEntity, MsgExpectedHeadSHA
	case pr.Fork && !pr.MaintainerCanModify:
		return http.StatusForbidden, MsgHeadRepoPermission
	case pr.TouchesWorkflows && !s.workflows:
		return http.StatusForbidden, fmt.Sprintf(MsgWorkflowsFormat, workflowFile)
	case pr.Unmergeable, rp.conflicted(pr):
		return http.StatusUnprocessableEntity, MsgUpdateConflict
	case !pr.Behind:
		return http.StatusUnprocessableEntity, MsgNoNewCommits
	}
	if s.updateDelay > 0 {
		s.updatesDue = append(s.updatesDue, dueUpdate{rp: rp, pr: pr.Number, from: pr.HeadSHA, kind: kind, due: s.clock().Add(s.updateDelay)})
		return 0, ""
	}
	s.updateNow(rp, pr, kind)
	return 0, ""
}

// dueUpdate is a branch update GitHub accepted (202) and has not made yet
// (SetBranchUpdateDelay).
type dueUpdate struct {
	rp         *repo
	pr         int
	from, kind string
	due        time.Time
}

// SetBranchUpdateDelay makes update-branch (REST, and GraphQL's
// updatePullRequestBranch) do its work d after accepting it, on the
// fake's clock, as GitHub does it in the background after its 202: until
// then the pull request reads as it was, its old head still behind the
// base. An update whose pull request was closed, or whose head moved,
// meanwhile does nothing. Each request settles what is due, and so does
// CompleteDueChecks; NextCIDue counts them. 0 (the default): at once.
func (s *Server) SetBranchUpdateDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateDelay = d
}

// settleUpdates makes the branch updates that are due. Called with s.mu
// held.
func (s *Server) settleUpdates() {
	now := s.clock()
	keep := s.updatesDue[:0]
	for _, u := range s.updatesDue {
		if now.Before(u.due) {
			keep = append(keep, u)
			continue
		}
		if pr := u.rp.prs[u.pr]; pr != nil && pr.State == "open" && pr.HeadSHA == u.from && pr.Behind {
			s.updateNow(u.rp, pr, u.kind)
		}
	}
	s.updatesDue = keep
}

// updateNow gives pr the head its branch update makes. Called with s.mu
// held.
func (s *Server) updateNow(rp *repo, pr *PR, kind string) {
	method := "merge"
	if kind == "rebase" {
		method = "rebase"
	}
	from := pr.HeadSHA
	pr.HeadSHA = DeriveSHA(from, kind)
	pr.Behind = false
	pr.UpdatedAt = s.now()
	pr.unknownReads = s.unknownReads
	s.commitBranchUpdate(rp, pr, from, kind)
	s.rec.updates = append(s.rec.updates, BranchUpdate{Repo: rp.fullName, PRNumber: pr.Number, FromSHA: from, ToSHA: pr.HeadSHA, Method: method})
}

func (s *Server) getProtection(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	branch := r.PathValue("branch")
	b := rp.protection[branch]
	if b == nil {
		writeError(w, http.StatusNotFound, "Branch not protected")
		return
	}
	writeJSON(w, http.StatusOK, s.protectionJSON(rp, branch, b))
}

func (s *Server) getRequiredChecks(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	branch := r.PathValue("branch")
	b := rp.protection[branch]
	if b == nil || b.checks == nil {
		// GitHub's answer for a protected branch without required checks.
		writeError(w, http.StatusNotFound, "Required status checks not enabled")
		return
	}
	writeJSON(w, http.StatusOK, s.requiredChecksJSON(rp, branch, b.checks))
}

func (s *Server) getBranchRules(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	rules := []obj{}
	if b := rp.rulesets[r.PathValue("branch")]; b != nil {
		rules = s.rulesJSON(rp, b)
	}
	writeJSON(w, http.StatusOK, paginate(w, r, rules))
}

func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	sha := rp.resolveRef(r.PathValue("ref"))
	q := r.URL.Query()
	var runs []*checkRun
	if q.Get("filter") == "all" {
		for i := len(rp.checkRuns) - 1; i >= 0; i-- {
			if rp.checkRuns[i].HeadSHA == sha {
				runs = append(runs, rp.checkRuns[i])
			}
		}
	} else {
		runs = rp.latestRuns(sha)
	}
	if name := q.Get("check_name"); name != "" {
		var kept []*checkRun
		for _, cr := range runs {
			if cr.Name == name {
				kept = append(kept, cr)
			}
		}
		runs = kept
	}
	stale := rp.staleChecks[sha] > 0
	if stale {
		rp.staleChecks[sha]--
	}
	out := []obj{}
	for _, cr := range paginate(w, r, runs) {
		o := s.checkRunJSON(rp, cr)
		if stale {
			o["status"], o["conclusion"], o["completed_at"] = "in_progress", nil, nil
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, obj{"total_count": len(runs), "check_runs": out})
}

func (s *Server) combinedStatus(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	sha := rp.resolveRef(r.PathValue("ref"))
	all := rp.latestStatuses(sha)
	state := "success"
	if len(all) == 0 {
		state = "pending"
	}
	for _, st := range all {
		switch st.State {
		case "failure", "error":
			state = "failure"
		case "pending":
			if state != "failure" {
				state = "pending"
			}
		}
	}
	out := []obj{}
	for _, st := range paginate(w, r, all) {
		out = append(out, s.statusJSON(rp, st))
	}
	writeJSON(w, http.StatusOK, obj{
		"state":       state,
		"statuses":    out,
		"sha":         sha,
		"total_count": len(all),
		"repository":  s.repoJSON(rp, true),
		"commit_url":  s.apiURL("repos/%s/commits/%s", rp.fullName, sha),
		"url":         s.apiURL("repos/%s/commits/%s/status", rp.fullName, sha),
	})
}

func (s *Server) createCommitStatus(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	var body struct {
		State   string `json:"state"`
		Context string `json:"context"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	switch body.State {
	case "pending", "success", "failure", "error":
	default:
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if body.Context == "" {
		body.Context = "default"
	}
	st := s.addStatus(rp, r.PathValue("sha"), body.Context, body.State)
	writeJSON(w, http.StatusCreated, s.statusJSON(rp, st))
}

func (s *Server) createComment(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "issue_number")
	if pr == nil {
		return
	}
	var body struct {
		Body string `json:"body"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Body == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if utf8.RuneCountInString(body.Body) > 65536 {
		writeError(w, http.StatusUnprocessableEntity, "Body is too long (maximum is 65536 characters)")
		return
	}
	id := s.newID()
	now := s.now()
	s.rec.comments = append(s.rec.comments, Comment{Repo: rp.fullName, PRNumber: pr.Number, Body: body.Body})
	writeJSON(w, http.StatusCreated, obj{
		"id":                 id,
		"node_id":            nodeID("IC", id),
		"url":                s.apiURL("repos/%s/issues/comments/%d", rp.fullName, id),
		"html_url":           fmt.Sprintf("%s%s/pull/%d#issuecomment-%d", htmlBase, rp.fullName, pr.Number, id),
		"body":               body.Body,
		"user":               s.botJSON(),
		"created_at":         ts(now),
		"updated_at":         ts(now),
		"issue_url":          s.apiURL("repos/%s/issues/%d", rp.fullName, pr.Number),
		"author_association": "NONE",
	})
}

func (s *Server) removeLabel(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "issue_number")
	if pr == nil {
		return
	}
	name := r.PathValue("name")
	for i, l := range pr.Labels {
		if strings.EqualFold(l, name) {
			pr.Labels = append(pr.Labels[:i:i], pr.Labels[i+1:]...)
			pr.UpdatedAt = s.now()
			s.rec.labelsRemoved = append(s.rec.labelsRemoved, LabelRemoval{Repo: rp.fullName, PRNumber: pr.Number, Label: l})
			s.addIssueEvent(rp, pr.Number, "unlabeled", l, pr.UpdatedAt)
			writeJSON(w, http.StatusOK, s.labelsJSON(rp, pr.Labels))
			return
		}
	}
	writeError(w, http.StatusNotFound, "Label does not exist")
}

type checkRunBody struct {
	Name       *string `json:"name"`
	HeadSHA    string  `json:"head_sha"`
	Status     *string `json:"status"`
	Conclusion *string `json:"conclusion"`
	Output     *struct {
		Title   string `json:"title"`
		Summary string `json:"summary"`
	} `json:"output"`
}

// apply validates and applies a create or update body to cr.
func (b checkRunBody) apply(cr *checkRun, s *Server) string {
	if b.Name != nil {
		cr.Name = *b.Name
	}
	if b.Status != nil {
		switch *b.Status {
		case "queued", "in_progress", "completed":
			cr.Status = *b.Status
		default:
			return "Invalid status"
		}
	}
	if b.Conclusion != nil {
		switch *b.Conclusion {
		case "success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required":
			cr.Conclusion, cr.Status = *b.Conclusion, "completed"
		default:
			return "Invalid conclusion"
		}
	}
	if cr.Status == "completed" && cr.Conclusion == "" {
		return "Conclusion is required when status is completed"
	}
	if cr.Status == "completed" && cr.CompletedAt.IsZero() {
		cr.CompletedAt = s.now()
	}
	if b.Output != nil {
		if b.Output.Title == "" || b.Output.Summary == "" {
			return "Output requires title and summary"
		}
		// GitHub's limit ("Create a check run": output.summary and
		// output.text, maximum length 65535 characters), answered 422.
		if utf8.RuneCountInString(b.Output.Summary) > 65535 {
			return "Invalid request.\n\nOnly 65535 characters are allowed; " + strconv.Itoa(utf8.RuneCountInString(b.Output.Summary)) + " were supplied."
		}
		cr.Title, cr.Summary = b.Output.Title, b.Output.Summary
	}
	if cr.Name == "" {
		return "Name can't be blank"
	}
	return ""
}

func (s *Server) createCheckRun(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	var body checkRunBody
	if !decodeBody(w, r, &body) {
		return
	}
	cr := &checkRun{HeadSHA: body.HeadSHA, Status: "queued", AppID: s.appID, AppSlug: "mergegate", StartedAt: s.now()}
	if msg := body.apply(cr, s); msg != "" || cr.HeadSHA == "" {
		if msg == "" {
			msg = "Head sha can't be blank"
		}
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	cr.ID = s.newID()
	rp.checkRuns = append(rp.checkRuns, cr)
	s.recordCheckRun("created", rp, cr)
	writeJSON(w, http.StatusCreated, s.checkRunJSON(rp, cr))
}

func (s *Server) updateCheckRun(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("check_run_id"), 10, 64)
	var cr *checkRun
	for _, c := range rp.checkRuns {
		if c.ID == id {
			cr = c
		}
	}
	if cr == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	if cr.AppID != s.appID {
		writeError(w, http.StatusForbidden, "Invalid app_id `"+strconv.FormatInt(s.appID, 10)+"` - check run can only be modified by the GitHub App that created it.")
		return
	}
	var body checkRunBody
	if !decodeBody(w, r, &body) {
		return
	}
	updated := *cr
	if msg := body.apply(&updated, s); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	*cr = updated
	s.recordCheckRun("updated", rp, cr)
	writeJSON(w, http.StatusOK, s.checkRunJSON(rp, cr))
}

func (s *Server) recordCheckRun(action string, rp *repo, cr *checkRun) {
	s.rec.checkRuns = append(s.rec.checkRuns, CheckRunWrite{
		Action: action, Repo: rp.fullName, ID: cr.ID, HeadSHA: cr.HeadSHA, Name: cr.Name,
		Status: cr.Status, Conclusion: cr.Conclusion, Title: cr.Title, Summary: cr.Summary, Seq: s.rec.nextSeq(),
	})
}
