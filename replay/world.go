package replay

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// world builds the fake GitHub of an offline replay from the deliveries
// themselves: before each delivery is handed to mergegate, GitHub is made
// to look the way the delivery says it looked when it was sent.
type world struct {
	gh       *fakegithub.Server
	scenario Scenario
	repos    map[string]string // full name -> tenant, for repositories added to the fake
	prs      map[string][]int  // full name -> PR numbers added, in order
}

func newWorld(gh *fakegithub.Server, sc Scenario) *world {
	return &world{gh: gh, scenario: sc, repos: map[string]string{}, prs: map[string][]int{}}
}

// The parts of payloads the world reads. Only what it needs is decoded.
type (
	wRepo struct {
		FullName      string `json:"full_name"`
		DefaultBranch string `json:"default_branch"`
		Owner         *struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"owner"`
	}
	wApp struct {
		ID   int64  `json:"id"`
		Slug string `json:"slug"`
		Name string `json:"name"`
	}
	wPR struct {
		Number    int             `json:"number"`
		State     string          `json:"state"`
		Title     string          `json:"title"`
		Draft     bool            `json:"draft"`
		Merged    bool            `json:"merged"`
		Mergeable *bool           `json:"mergeable"`
		MState    string          `json:"mergeable_state"`
		AutoMerge json.RawMessage `json:"auto_merge"`
		Labels    []struct {
			Name string `json:"name"`
		} `json:"labels"`
		User *struct {
			Login string `json:"login"`
		} `json:"user"`
		Head struct {
			Ref string `json:"ref"`
			Sha string `json:"sha"`
		} `json:"head"`
		Base struct {
			Ref string `json:"ref"`
		} `json:"base"`
		MergeCommitSHA string `json:"merge_commit_sha"`
	}
	wCheck struct {
		Name       string `json:"name"`
		HeadSha    string `json:"head_sha"`
		Status     string `json:"status"`
		Conclusion string `json:"conclusion"`
		App        *wApp  `json:"app"`
	}
	wPayload struct {
		Action       string `json:"action"`
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository  *wRepo  `json:"repository"`
		PullRequest *wPR    `json:"pull_request"`
		CheckRun    *wCheck `json:"check_run"`
		CheckSuite  *wCheck `json:"check_suite"`
		// status
		Sha     string `json:"sha"`
		Context string `json:"context"`
		State   string `json:"state"`
		// push
		Ref     string `json:"ref"`
		After   string `json:"after"`
		Deleted bool   `json:"deleted"`
		// issue_comment
		Issue *struct {
			Number      int             `json:"number"`
			PullRequest json.RawMessage `json:"pull_request"`
		} `json:"issue"`
		Comment *struct {
			ID   int64  `json:"id"`
			Body string `json:"body"`
			User *struct {
				Login string `json:"login"`
			} `json:"user"`
		} `json:"comment"`
		// installation, installation_repositories
		Repositories      []wRepo `json:"repositories"`
		RepositoriesAdded []wRepo `json:"repositories_added"`
	}
)

// apply updates the fake GitHub from one accepted delivery. Payloads are
// GitHub's word at the time they were sent; what mergegate itself did on
// the fake (merges, branch updates, labels removed) stands until a later
// payload says otherwise.
func (w *world) apply(tenant string, rec app.Recorded, hookAppID int64) (err error) {
	defer func() {
		// The fake fails loudly on misuse; a replay reports it instead.
		if r := recover(); r != nil {
			err = fmt.Errorf("building the fake GitHub from the payload: %v", r)
		}
	}()
	var p wPayload
	if err := json.Unmarshal(rec.Payload, &p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if p.Repository != nil && p.Repository.FullName != "" {
		w.ensureRepo(tenant, p.Repository.FullName, p.Repository.DefaultBranch)
		w.ownerRole(p.Repository)
	}
	repo := ""
	if p.Repository != nil {
		repo = p.Repository.FullName
	}
	if repo != "" && w.repos[repo] != tenant {
		return nil // a repository of another installation: GitHub never sends that
	}
	switch rec.Event {
	case "pull_request", "pull_request_review":
		if p.PullRequest != nil && p.PullRequest.Number > 0 && repo != "" {
			w.upsertPR(repo, p.PullRequest)
		}
	case "check_run":
		c := p.CheckRun
		if c == nil || c.HeadSha == "" || c.Name == "" || repo == "" || w.ownCheck(c.Name, c.App, hookAppID) {
			return nil
		}
		if c.Status == "completed" && c.Conclusion == "" {
			return nil
		}
		w.gh.SetCheckRun(repo, c.HeadSha, c.Name, orDefault(c.Status, "completed"), c.Conclusion)
	case "check_suite":
		c := p.CheckSuite
		if c == nil || c.HeadSha == "" || repo == "" {
			return nil
		}
		name := "check_suite"
		if c.App != nil {
			name = orDefault(c.App.Slug, orDefault(c.App.Name, name))
		}
		if w.ownCheck(name, c.App, hookAppID) || (c.Status == "completed" && c.Conclusion == "") {
			return nil
		}
		w.gh.SetCheckRun(repo, c.HeadSha, name, orDefault(c.Status, "queued"), c.Conclusion)
	case "status":
		if p.Sha != "" && p.Context != "" && p.State != "" && repo != "" && p.Context != forge.DefaultCheckRunName {
			w.gh.SetStatus(repo, p.Sha, p.Context, p.State)
		}
	case "push":
		branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
		if !ok || p.Deleted || strings.Trim(p.After, "0") == "" || repo == "" {
			return nil
		}
		// New commits on a base branch: its open pull requests are behind.
		for _, n := range w.prs[repo] {
			if pr, ok := w.gh.PR(repo, n); ok && pr.State == "open" && pr.BaseRef == branch && pr.HeadSHA != p.After {
				w.gh.SetBehind(repo, n, true)
			}
		}
	case "issue_comment":
		// The comment exists on GitHub (mergegate reacts to it).
		if c, is := p.Comment, p.Issue; c != nil && is != nil && c.User != nil && repo != "" && len(is.PullRequest) > 0 && string(is.PullRequest) != "null" {
			if _, ok := w.gh.PR(repo, is.Number); ok {
				w.gh.AddCommentID(repo, is.Number, c.ID, c.User.Login, c.Body)
			}
		}
	case "installation", "installation_repositories":
		w.gh.AddInstallation(tenant)
		for _, r := range append(slices.Clone(p.Repositories), p.RepositoriesAdded...) {
			if r.FullName != "" {
				w.ensureRepo(tenant, r.FullName, r.DefaultBranch)
			}
		}
	}
	return nil
}

// ownCheck: mergegate's own check run and check suite are not CI results.
// The App is known by the check run's name, by the hook's App id when the
// recording kept X-GitHub-Hook-Installation-Target-ID, or by a name that
// says mergegate.
func (w *world) ownCheck(name string, app *wApp, hookAppID int64) bool {
	if name == forge.DefaultCheckRunName {
		return true
	}
	if app == nil {
		return false
	}
	if hookAppID != 0 && app.ID == hookAppID {
		return true
	}
	return strings.Contains(strings.ToLower(app.Slug+" "+app.Name), "mergegate")
}

// ownerRole: on GitHub the owner of a user's repository is its admin
// (its pushes keep a writer's consent to a queued head). A scenario's
// roles say otherwise.
func (w *world) ownerRole(r *wRepo) {
	if _, added := w.repos[r.FullName]; !added || r.Owner == nil || r.Owner.Type != "User" || r.Owner.Login == "" {
		return
	}
	if _, set := w.scenario.Roles[r.Owner.Login]; set {
		return
	}
	w.gh.SetRole(r.FullName, r.Owner.Login, "admin")
}

func (w *world) ensureRepo(tenant, fullName, defaultBranch string) {
	if _, ok := w.repos[fullName]; ok {
		return
	}
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return
	}
	w.repos[fullName] = tenant
	w.gh.AddRepo(tenant, fullName, defaultBranch)
	branches := make([]string, 0, len(w.scenario.Required))
	for b := range w.scenario.Required {
		branches = append(branches, b)
	}
	slices.Sort(branches) // the fake's ids follow the order of calls
	for _, b := range branches {
		rq := w.scenario.Required[b]
		w.gh.SetRequired(fullName, b, rq.Contexts, rq.Strict)
	}
	for path, content := range w.scenario.Files {
		w.gh.SetFile(fullName, path, content)
	}
	for user, role := range w.scenario.Roles {
		w.gh.SetRole(fullName, user, role)
	}
}

func (w *world) upsertPR(repo string, p *wPR) {
	var labels []string
	for _, l := range p.Labels {
		labels = append(labels, l.Name)
	}
	autoMerge := len(p.AutoMerge) > 0 && string(p.AutoMerge) != "null"
	state := orDefault(p.State, "open")
	fill := func(pr *fakegithub.PR) {
		if pr.Merged {
			return // merged (by mergegate, or as an earlier payload said): final on GitHub
		}
		if p.Head.Sha != "" {
			pr.HeadSHA = p.Head.Sha
		}
		if p.Head.Ref != "" {
			pr.HeadRef = p.Head.Ref
		}
		if p.Base.Ref != "" {
			pr.BaseRef = p.Base.Ref
		}
		if p.Title != "" {
			pr.Title = p.Title
		}
		if p.User != nil && p.User.Login != "" {
			pr.Author = p.User.Login
		}
		pr.Labels = labels
		pr.Draft = p.Draft
		pr.AutoMerge = autoMerge
		pr.State = state
		if p.Merged {
			pr.Merged = true
			if p.MergeCommitSHA != "" {
				pr.MergeCommitSHA = p.MergeCommitSHA
			}
		}
		if p.Mergeable != nil {
			pr.Unmergeable = !*p.Mergeable
		}
		if p.MState == "behind" {
			pr.Behind = true
		}
	}
	if _, ok := w.gh.PR(repo, p.Number); ok {
		w.gh.UpdatePR(repo, p.Number, fill)
		return
	}
	pr := fakegithub.PR{Number: p.Number, Behind: slices.Contains(w.scenario.Behind, p.Number)}
	fill(&pr)
	w.gh.AddPR(repo, pr)
	w.prs[repo] = append(w.prs[repo], p.Number)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// payloadTime is the latest of the times a payload carries about its own
// event (the PR's updated_at, a check's completed_at, a status's
// updated_at, a push's head commit...); zero when it carries none.
func payloadTime(event string, payload []byte) time.Time {
	var m map[string]any
	if json.Unmarshal(payload, &m) != nil {
		return time.Time{}
	}
	var paths [][]string
	switch event {
	case "pull_request":
		paths = [][]string{{"pull_request", "updated_at"}, {"pull_request", "closed_at"}, {"pull_request", "merged_at"}}
	case "pull_request_review":
		paths = [][]string{{"review", "submitted_at"}, {"pull_request", "updated_at"}}
	case "check_run":
		paths = [][]string{{"check_run", "completed_at"}, {"check_run", "started_at"}}
	case "check_suite":
		paths = [][]string{{"check_suite", "updated_at"}, {"check_suite", "created_at"}}
	case "status":
		paths = [][]string{{"updated_at"}, {"created_at"}}
	case "push":
		paths = [][]string{{"head_commit", "timestamp"}, {"repository", "pushed_at"}}
	case "installation", "installation_repositories":
		paths = [][]string{{"installation", "updated_at"}, {"installation", "created_at"}}
	default:
		paths = [][]string{{"updated_at"}, {"created_at"}}
	}
	var latest time.Time
	for _, path := range paths {
		if t := timeAt(m, path); t.After(latest) {
			latest = t
		}
	}
	return latest
}

// timeAt reads an RFC 3339 string or epoch seconds at path.
func timeAt(m map[string]any, path []string) time.Time {
	var v any = m
	for _, k := range path {
		o, ok := v.(map[string]any)
		if !ok {
			return time.Time{}
		}
		v = o[k]
	}
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339, x); err == nil {
			return t.UTC()
		}
	case float64:
		if x > 0 {
			return time.Unix(int64(x), 0).UTC()
		}
	}
	return time.Time{}
}

// hookAppID is the App id a recording kept in the
// X-GitHub-Hook-Installation-Target-ID header (0 when not kept).
func hookAppID(h map[string]string) int64 {
	for k, v := range h {
		if strings.EqualFold(k, "X-GitHub-Hook-Installation-Target-ID") {
			id, _ := strconv.ParseInt(v, 10, 64)
			return id
		}
	}
	return 0
}
