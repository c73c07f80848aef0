package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-github/v62/github"
)

// errMergeMethod says which merge methods there are.
var errMergeMethod = errors.New("want merge, squash or rebase")

// CheckMergeMethod is the one validation of a merge method: nil for merge,
// squash or rebase, otherwise an error saying what is wanted (the caller
// names the setting and the value).
func CheckMergeMethod(method string) error {
	switch method {
	case MethodMerge, MethodSquash, MethodRebase:
		return nil
	}
	return errMergeMethod
}

// GetPR reads one pull request.
func (c *Client) GetPR(ctx context.Context, tenant, repo string, number int) (PR, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.get", tenant, repo)
	if err != nil {
		return PR{}, err
	}
	cl.number = number
	pr, _, err := in.gh.PullRequests.Get(ctx, owner, name, number)
	if err != nil {
		return PR{}, cl.classify(ctx, err, false)
	}
	return toPR(pr), nil
}

// ListOpenPRs lists every open pull request of repo (all pages).
func (c *Client) ListOpenPRs(ctx context.Context, tenant, repo string) ([]PR, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.list", tenant, repo)
	if err != nil {
		return nil, err
	}
	opts := &github.PullRequestListOptions{State: "open", ListOptions: github.ListOptions{PerPage: 100}}
	var out []PR
	for {
		prs, resp, err := in.gh.PullRequests.List(ctx, owner, name, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, pr := range prs {
			out = append(out, toPR(pr))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// Merge merges PR number of repo only if its head is still sha (GitHub's
// "sha" guard), with method merge, squash or rebase (empty = merge). It
// returns the merge commit's sha.
//
// Errors: *MergeError 405 (not mergeable; GitHub's reason in Message),
// 409 (head moved: IsHeadModified), 422, or 403 (e.g. a change under
// .github/workflows without the workflows permission; RefusalOf sorts
// them); *TransientError on 5xx or a
// timeout, when the merge may or may not have happened: re-read the PR
// before retrying.
func (c *Client) Merge(ctx context.Context, tenant, repo string, number int, sha, method string) (string, error) {
	return c.MergeWith(ctx, tenant, repo, number, sha, method, CommitMessage{})
}

// CommitMessage is the merge commit's title and message (commit_title,
// commit_message); empty fields leave GitHub's own.
type CommitMessage struct {
	Title, Message string
}

// MergeWith is Merge with the merge commit's title and message.
func (c *Client) MergeWith(ctx context.Context, tenant, repo string, number int, sha, method string, msg CommitMessage) (string, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.merge", tenant, repo)
	if err != nil {
		return "", err
	}
	cl.op, cl.number, cl.sha = "merge", number, sha
	if sha == "" {
		return "", fmt.Errorf("forge: refusing to merge %s#%d without a sha guard", repo, number)
	}
	if method == "" {
		method = MethodMerge
	}
	if err := CheckMergeMethod(method); err != nil {
		return "", fmt.Errorf("forge: unknown merge method %q (%w)", method, err)
	}
	res, _, err := in.gh.PullRequests.Merge(ctx, owner, name, number, clip(msg.Message, maxCommitMessage),
		&github.PullRequestOptions{SHA: sha, MergeMethod: method, CommitTitle: clip(msg.Title, maxCommitTitle)})
	if err != nil {
		return "", cl.classify(ctx, err, true)
	}
	if !res.GetMerged() {
		return "", &MergeError{Op: cl.op, Repo: repo, Number: number, SHA: sha, Status: http.StatusOK, Message: res.GetMessage()}
	}
	return res.GetSHA(), nil
}

// UpdateBranch asks GitHub to merge the base branch into the PR's head
// (202 Accepted is success: GitHub does it in the background and a
// pull_request synchronize event follows). expectedHeadSHA guards against a
// head that moved (IsHeadModified). Refusals are *MergeError (403, 422),
// sorted by RefusalOf.
func (c *Client) UpdateBranch(ctx context.Context, tenant, repo string, number int, expectedHeadSHA string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.update-branch", tenant, repo)
	if err != nil {
		return err
	}
	cl.op, cl.number, cl.sha = "update-branch", number, expectedHeadSHA
	opts := &github.PullRequestBranchUpdateOptions{}
	if expectedHeadSHA != "" {
		opts.ExpectedHeadSHA = github.String(expectedHeadSHA)
	}
	_, _, err = in.gh.PullRequests.UpdateBranch(ctx, owner, name, number, opts)
	return cl.classify(ctx, err, true)
}

// Comment posts body as a comment on PR (or issue) number.
func (c *Client) Comment(ctx context.Context, tenant, repo string, number int, body string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "issues.create-comment", tenant, repo)
	if err != nil {
		return err
	}
	cl.number = number
	_, _, err = in.gh.Issues.CreateComment(ctx, owner, name, number, &github.IssueComment{Body: github.String(clip(body, maxCommentBody))})
	return cl.classify(ctx, err, false)
}

// RemoveLabel removes label from PR number. A label that is already gone
// (404) is not an error.
func (c *Client) RemoveLabel(ctx context.Context, tenant, repo string, number int, label string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "issues.remove-label", tenant, repo)
	if err != nil {
		return err
	}
	cl.number = number
	_, err = in.gh.Issues.RemoveLabelForIssue(ctx, owner, name, number, label)
	err = cl.classify(ctx, err, false)
	if IsNotFound(err) {
		return nil
	}
	return err
}

func toPR(p *github.PullRequest) PR {
	pr := PR{
		Number:         p.GetNumber(),
		NodeID:         p.GetNodeID(),
		Title:          p.GetTitle(),
		Body:           p.GetBody(),
		State:          p.GetState(),
		Draft:          p.GetDraft(),
		Merged:         p.GetMerged(),
		HeadSHA:        p.GetHead().GetSHA(),
		HeadRef:        p.GetHead().GetRef(),
		BaseRef:        p.GetBase().GetRef(),
		Author:         p.GetUser().GetLogin(),
		HTMLURL:        p.GetHTMLURL(),
		AutoMerge:      p.AutoMerge != nil,
		MergeableState: p.GetMergeableState(),
		Mergeable:      p.Mergeable,
		BaseSHA:        p.GetBase().GetSHA(),
		// A deleted fork leaves head.repo null.
		Fork:                p.GetHead().GetRepo() == nil || p.GetHead().GetRepo().GetFullName() != p.GetBase().GetRepo().GetFullName(),
		MaintainerCanModify: p.GetMaintainerCanModify(),
		AutoMergeMethod:     p.GetAutoMerge().GetMergeMethod(),
		CreatedAt:           p.GetCreatedAt().Time,
		UpdatedAt:           p.GetUpdatedAt().Time,
	}
	if r := p.GetBase().GetRepo(); r != nil && r.AllowMergeCommit != nil && r.AllowSquashMerge != nil && r.AllowRebaseMerge != nil {
		pr.Methods = &MergeMethods{Merge: *r.AllowMergeCommit, Squash: *r.AllowSquashMerge, Rebase: *r.AllowRebaseMerge}
	}
	if !pr.Merged && p.MergedAt != nil {
		pr.Merged = true // the list endpoint has merged_at but no merged
	}
	for _, l := range p.Labels {
		pr.Labels = append(pr.Labels, l.GetName())
	}
	return pr
}
