package forge

import (
	"context"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// Sources of a CheckResult.
const (
	SourceCheckRun = "check_run"
	SourceStatus   = "status"
)

// CheckResult is one check run or one commit status reported on a sha.
type CheckResult struct {
	Name   string
	Source string // SourceCheckRun or SourceStatus
	// Status: check runs queued, in_progress or completed (also waiting,
	// requested, pending); statuses "completed" once their state is not
	// pending, else "pending".
	Status string
	// Conclusion: check runs success, failure, neutral, cancelled, skipped,
	// timed_out, action_required, stale, startup_failure (empty while not
	// completed); statuses their state: success, failure, error or pending.
	Conclusion string
	// At is when the result was last updated (completed_at or started_at for
	// check runs, updated_at for statuses); used to pick the latest of
	// several results with the same name and source.
	At time.Time
	// AppID is the GitHub App that reported a check run (0 for statuses).
	AppID int64
}

// CheckRun is the content of mergegate's own check run.
type CheckRun struct {
	Name       string // default DefaultCheckRunName
	Status     string // queued, in_progress, completed
	Conclusion string // required when Status is completed
	Title      string
	Summary    string
	// DetailsURL links the run to where its full story is (the
	// repository's page on mergegate's dashboard); empty: none.
	DetailsURL string
}

// DefaultCheckRunName is the name of mergegate's own check run. EvaluateGate
// ignores check runs with this name.
const DefaultCheckRunName = "mergegate"

// CheckResults returns every check run (latest per name, all pages) and every
// commit status (the combined status, all pages) reported on sha.
func (c *Client) CheckResults(ctx context.Context, tenant, repo, sha string) ([]CheckResult, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "checks.list-for-ref", tenant, repo)
	if err != nil {
		return nil, err
	}
	cl.sha = sha
	var out []CheckResult
	opts := &github.ListCheckRunsOptions{Filter: github.String("latest"), ListOptions: github.ListOptions{PerPage: 100}}
	for {
		res, resp, err := in.gh.Checks.ListCheckRunsForRef(ctx, owner, name, sha, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, r := range res.CheckRuns {
			at := r.GetCompletedAt().Time
			if at.IsZero() {
				at = r.GetStartedAt().Time
			}
			out = append(out, CheckResult{Name: r.GetName(), Source: SourceCheckRun, Status: r.GetStatus(), Conclusion: r.GetConclusion(), At: at, AppID: r.GetApp().GetID()})
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}

	ctx = withOp(ctx, "repos.get-combined-status-for-ref")
	cl.op = "repos.get-combined-status-for-ref"
	lo := &github.ListOptions{PerPage: 100}
	for {
		cs, resp, err := in.gh.Repositories.GetCombinedStatus(ctx, owner, name, sha, lo)
		if err != nil {
			err = cl.classify(ctx, err, false)
			if IsNotFound(err) {
				break // no statuses for this ref
			}
			return nil, err
		}
		for _, s := range cs.Statuses {
			status := "completed"
			if s.GetState() == "pending" {
				status = "pending"
			}
			out = append(out, CheckResult{Name: s.GetContext(), Source: SourceStatus, Status: status, Conclusion: s.GetState(), At: s.GetUpdatedAt().Time})
		}
		if resp.NextPage == 0 {
			break
		}
		lo.Page = resp.NextPage
	}
	return out, nil
}

// CreateCheckRun creates a check run on sha and returns its id.
func (c *Client) CreateCheckRun(ctx context.Context, tenant, repo, sha string, cr CheckRun) (int64, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "checks.create", tenant, repo)
	if err != nil {
		return 0, err
	}
	cl.sha = sha
	cr = cr.withDefaults()
	opts := github.CreateCheckRunOptions{Name: cr.Name, HeadSHA: sha, Output: cr.output()}
	if cr.DetailsURL != "" {
		opts.DetailsURL = github.String(cr.DetailsURL)
	}
	if cr.Status != "" {
		opts.Status = github.String(cr.Status)
	}
	if cr.Conclusion != "" {
		opts.Conclusion = github.String(cr.Conclusion)
	}
	run, _, err := in.gh.Checks.CreateCheckRun(ctx, owner, name, opts)
	if err != nil {
		return 0, cl.classify(ctx, err, false)
	}
	return run.GetID(), nil
}

// UpdateCheckRun updates check run id.
func (c *Client) UpdateCheckRun(ctx context.Context, tenant, repo string, id int64, cr CheckRun) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "checks.update", tenant, repo)
	if err != nil {
		return err
	}
	cr = cr.withDefaults()
	opts := github.UpdateCheckRunOptions{Name: cr.Name, Output: cr.output()}
	if cr.DetailsURL != "" {
		opts.DetailsURL = github.String(cr.DetailsURL)
	}
	if cr.Status != "" {
		opts.Status = github.String(cr.Status)
	}
	if cr.Conclusion != "" {
		opts.Conclusion = github.String(cr.Conclusion)
	}
	_, _, err = in.gh.Checks.UpdateCheckRun(ctx, owner, name, id, opts)
	return cl.classify(ctx, err, false)
}

func (cr CheckRun) withDefaults() CheckRun {
	if cr.Name == "" {
		cr.Name = DefaultCheckRunName
	}
	if cr.Conclusion != "" && cr.Status == "" {
		cr.Status = "completed"
	}
	return cr
}

// output builds the check run output; GitHub requires both title and summary.
func (cr CheckRun) output() *github.CheckRunOutput {
	if cr.Title == "" && cr.Summary == "" {
		return nil
	}
	title, summary := cr.Title, cr.Summary
	if title == "" {
		title = cr.Name
	}
	if summary == "" {
		summary = title
	}
	title = clip(strings.ReplaceAll(title, "\n", " "), maxCheckRunTitle)
	return &github.CheckRunOutput{Title: github.String(title), Summary: github.String(clip(summary, maxCheckRunSummary))}
}

// ListInstallationRepos lists the full names of every repository the
// installation can access (all pages).
func (c *Client) ListInstallationRepos(ctx context.Context, tenant string) ([]string, error) {
	ctx, in, _, _, cl, err := c.begin(ctx, "apps.list-repos-accessible-to-installation", tenant, "")
	if err != nil {
		return nil, err
	}
	opts := &github.ListOptions{PerPage: 100}
	var out []string
	for {
		res, resp, err := in.gh.Apps.ListRepos(ctx, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, r := range res.Repositories {
			out = append(out, r.GetFullName())
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}
