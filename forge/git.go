package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v62/github"
)

// Git branches and merges: what a merge train needs to build a branch
// from a base's tip, merge pull requests' heads into it, and land it.
//
// Every call is one request through the installation's usual stack (its
// request bound, the rate guard, the ETag cache for the GETs); none is
// retried here. Errors sort as everywhere in forge: *TransientError (5xx,
// timeouts, the network) and *RateLimitError may be tried again later
// (IsRetryable); the sentinels below and *ProtectedBranchError are
// GitHub's final answer to that request.

// Sentinel errors of the git calls, for errors.Is. The error returned
// also carries GitHub's answer (an *APIError) for the logs.
var (
	// ErrNotFound: GitHub answered 404 (a branch, commit or repository
	// that is not there, or not visible to the installation). Every
	// *APIError with status 404 is one.
	ErrNotFound = errors.New("not found")
	// ErrRefExists: CreateBranch's branch already exists (422 "Reference
	// already exists").
	ErrRefExists = errors.New("reference already exists")
	// ErrRefMissing: SetBranch's branch does not exist (422 "Reference
	// does not exist").
	ErrRefMissing = errors.New("reference does not exist")
	// ErrNotFastForward: SetBranch without force to a sha that does not
	// contain the branch's tip (422 "Update is not a fast forward"; bors-ng
	// met it when the base moved under a batch, bors-ng/bors-ng#856).
	ErrNotFastForward = errors.New("update is not a fast forward")
	// ErrMergeConflict: MergeBranch's head and base change the same lines
	// (409 "Merge conflict").
	ErrMergeConflict = errors.New("merge conflict")
	// ErrProtectedBranch: branch protection or a ruleset refused the
	// App's push (a *ProtectedBranchError says why).
	ErrProtectedBranch = errors.New("protected branch refused the push")
	// ErrBaseMissing: MergeBranch's base is not there (404 "Base does not
	// exist"; also ErrNotFound). Just after the branch was created or
	// moved, that is GitHub's read lagging its write: it answers so "from
	// time to time" (Mergifyio/mergify#3746), and the branch is there a
	// moment later.
	ErrBaseMissing = errors.New("base branch not there")
)

// ProtectedBranchError is GitHub refusing SetBranch on a protected branch:
// required reviews ("Changes must be made through a pull request."),
// required status checks the commit has not passed ("Required status
// check \"ci\" is expected."), push restrictions, no force pushes, a
// merge queue. It is the operator's to fix: let the App bypass the rules
// (it must be on the branch's bypass list), or land by replay (merging
// each pull request through the merge API). errors.Is(err,
// ErrProtectedBranch) is true.
type ProtectedBranchError struct {
	Repo, Branch string
	Status       int    // 422 (403 from some rulesets)
	Message      string // GitHub's words
}

func (e *ProtectedBranchError) Error() string {
	return fmt.Sprintf("github refused the push to %s@%s: %d %s", e.Repo, e.Branch, e.Status, e.Message)
}

// Is makes errors.Is(err, ErrProtectedBranch) true.
func (e *ProtectedBranchError) Is(target error) bool { return target == ErrProtectedBranch }

// Is makes errors.Is(err, ErrNotFound) true for a 404.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// IsRetryable reports whether err may go away by itself: a 5xx, a timeout
// or a network failure (*TransientError; the request may have taken
// effect: read the state again before repeating a write), or a rate limit
// (*RateLimitError; wait until its RetryAt). Any other error is GitHub's
// final answer to that request.
func IsRetryable(err error) bool {
	_, limited := IsRateLimited(err)
	return limited || IsTransient(err)
}

// MergeResult is what POST /merges did.
type MergeResult struct {
	// SHA is the new merge commit on base ("" when UpToDate).
	SHA string
	// TreeSHA is the merge commit's tree ("" when UpToDate).
	TreeSHA string
	// Parents are the merge commit's parents as GitHub answers them, in
	// order: the base's tip it merged into, then head. A caller that
	// knows what the base held checks them (a merge train's build
	// branch: anything else is a commit someone else pushed there).
	Parents []string
	// UpToDate: GitHub answered 204, head was already in base and nothing
	// was merged; base did not move.
	UpToDate bool
}

// BranchHead returns the sha branch points to (GET
// /repos/{owner}/{repo}/git/ref/heads/{branch}). A branch that does not
// exist is an error errors.Is(err, ErrNotFound).
func (c *Client) BranchHead(ctx context.Context, tenant, repo, branch string) (string, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.get-ref", tenant, repo)
	if err != nil {
		return "", err
	}
	ref, _, err := in.gh.Git.GetRef(ctx, owner, name, "heads/"+branch)
	if err != nil {
		return "", cl.classify(ctx, err, false)
	}
	if ref.GetObject().GetType() != "" && ref.GetObject().GetType() != "commit" {
		return "", fmt.Errorf("forge: %s: refs/heads/%s points to a %s, not a commit", repo, branch, ref.GetObject().GetType())
	}
	return ref.GetObject().GetSHA(), nil
}

// Branches lists repo's branches whose names start with prefix (GET
// /repos/{owner}/{repo}/git/matching-refs/heads/{prefix}): GitHub answers
// the refs that start with it, an empty array for none. It reads at most
// branchPages pages of 100: the first 1,000 names.
func (c *Client) Branches(ctx context.Context, tenant, repo, prefix string) ([]string, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.list-matching-refs", tenant, repo)
	if err != nil {
		return nil, err
	}
	var out []string
	opts := &github.ReferenceListOptions{Ref: "heads/" + prefix, ListOptions: github.ListOptions{PerPage: 100}}
	for page := 1; ; page++ {
		refs, resp, err := in.gh.Git.ListMatchingRefs(ctx, owner, name, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, r := range refs {
			if b, ok := strings.CutPrefix(r.GetRef(), "refs/heads/"); ok {
				out = append(out, b)
			}
		}
		if resp.NextPage == 0 || page == branchPages {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// branchPages bounds the pages Branches reads.
const branchPages = 10

// CreateBranch creates branch at sha (POST /repos/{owner}/{repo}/git/refs,
// 201). A branch already there is ErrRefExists; a sha the repository does
// not have is a 422 "Object does not exist" *APIError.
func (c *Client) CreateBranch(ctx context.Context, tenant, repo, branch, sha string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.create-ref", tenant, repo)
	if err != nil {
		return err
	}
	cl.sha = sha
	_, _, err = in.gh.Git.CreateRef(ctx, owner, name, &github.Reference{
		Ref: github.String("refs/heads/" + branch), Object: &github.GitObject{SHA: github.String(sha)},
	})
	err = cl.classify(ctx, err, false)
	if ae := asAPIError(err); ae != nil && ae.Status == http.StatusUnprocessableEntity && strings.EqualFold(ae.Message, "Reference already exists") {
		return fmt.Errorf("%w: %w", ErrRefExists, err)
	}
	return err
}

// SetBranch points branch at sha (PATCH
// /repos/{owner}/{repo}/git/refs/heads/{branch}). Without force, sha must
// contain the branch's tip (a fast-forward), else ErrNotFastForward. A
// protected branch that refuses the App is a *ProtectedBranchError
// (ErrProtectedBranch); a branch that does not exist is ErrRefMissing
// (422 "Reference does not exist").
func (c *Client) SetBranch(ctx context.Context, tenant, repo, branch, sha string, force bool) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.update-ref", tenant, repo)
	if err != nil {
		return err
	}
	cl.sha = sha
	_, _, err = in.gh.Git.UpdateRef(ctx, owner, name, &github.Reference{
		Ref: github.String("refs/heads/" + branch), Object: &github.GitObject{SHA: github.String(sha)},
	}, force)
	err = cl.classify(ctx, err, false)
	ae := asAPIError(err)
	switch {
	case ae == nil:
		return err
	case ae.Status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(ae.Message), "not a fast forward"):
		return fmt.Errorf("%w: %w", ErrNotFastForward, err)
	case ae.Status == http.StatusUnprocessableEntity && strings.Contains(strings.ToLower(ae.Message), "reference does not exist"):
		return fmt.Errorf("%w: %w", ErrRefMissing, err)
	case isProtectionRefusal(ae.Status, ae.Message):
		return &ProtectedBranchError{Repo: repo, Branch: branch, Status: ae.Status, Message: ae.Message}
	}
	return err
}

// isProtectionRefusal: GitHub's words when branch protection or a ruleset
// refuses a ref update. The REST API answers 422 with the same sentences
// the git push hook prints after "GH006: Protected branch update failed
// for refs/heads/<b>." (kubeflow/pipelines#4384, openwrt/packages#7624):
// "Required status check \"X\" is expected.", "N of M required status
// checks are expected.", "Changes must be made through a pull request."
// (googleapis/repo-automation-bots#5551, an updateRef), "Cannot
// force-push to a protected branch" (bors-ng/bors-ng#49), "You're not
// authorized to push to this branch", "Changes must be made through the
// merge queue", a ruleset's "Repository rule violations found".
func isProtectionRefusal(status int, msg string) bool {
	if status != http.StatusUnprocessableEntity && status != http.StatusForbidden && status != http.StatusConflict {
		return false
	}
	m := strings.ToLower(msg)
	for _, s := range []string{"protected branch", "required status check", "must be made through", "force-push", "force push",
		"not authorized to push", "rule violation", "approving review", "must not contain merge commits"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// MergeBranch merges head (a branch or a sha) into branch base (POST
// /repos/{owner}/{repo}/merges): 201 with the new merge commit, 204
// (UpToDate) when head is already in base. A conflict is
// ErrMergeConflict; base's protection or rules refusing the App is a
// *ProtectedBranchError; a base or head that is not there is ErrNotFound (404
// "Base does not exist", also ErrBaseMissing / "Head does not exist").
func (c *Client) MergeBranch(ctx context.Context, tenant, repo, base, head, message string) (MergeResult, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.merge", tenant, repo)
	if err != nil {
		return MergeResult{}, err
	}
	cl.sha = head
	req := &github.RepositoryMergeRequest{Base: github.String(base), Head: github.String(head)}
	if message != "" {
		req.CommitMessage = github.String(clip(message, maxCommitMessage))
	}
	commit, resp, err := in.gh.Repositories.Merge(ctx, owner, name, req)
	if err != nil {
		err = cl.classify(ctx, err, false)
		ae := asAPIError(err)
		switch {
		case ae == nil:
		case isProtectionRefusal(ae.Status, ae.Message):
			// A merge is a push to base (GitHub: "the same thing as
			// merging and then pushing"): its rules may refuse the App,
			// with 409 too. That is the operator's to fix, not a
			// conflict of the pull request's.
			return MergeResult{}, &ProtectedBranchError{Repo: repo, Branch: base, Status: ae.Status, Message: ae.Message}
		case ae.Status == http.StatusConflict:
			return MergeResult{}, fmt.Errorf("%w: %w", ErrMergeConflict, err)
		case ae.Status == http.StatusNotFound && strings.EqualFold(ae.Message, "Base does not exist"):
			return MergeResult{}, fmt.Errorf("%w: %w", ErrBaseMissing, err)
		}
		return MergeResult{}, err
	}
	if resp != nil && resp.StatusCode == http.StatusNoContent {
		return MergeResult{UpToDate: true}, nil
	}
	if commit.GetSHA() == "" {
		return MergeResult{}, fmt.Errorf("forge: %s: merging %s into %s: GitHub's answer (%d) has no commit sha", repo, ShortSHA(head), base, resp.StatusCode)
	}
	res := MergeResult{SHA: commit.GetSHA(), TreeSHA: commit.GetCommit().GetTree().GetSHA()}
	for _, p := range commit.Parents {
		res.Parents = append(res.Parents, p.GetSHA())
	}
	return res, nil
}

// CommitTree returns the tree sha of commit sha (GET
// /repos/{owner}/{repo}/git/commits/{commit_sha}): two commits with the
// same tree hold the same files. An unknown commit is ErrNotFound.
func (c *Client) CommitTree(ctx context.Context, tenant, repo, sha string) (string, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.get-commit", tenant, repo)
	if err != nil {
		return "", err
	}
	cl.sha = sha
	commit, _, err := in.gh.Git.GetCommit(ctx, owner, name, sha)
	if err != nil {
		return "", cl.classify(ctx, err, false)
	}
	if commit.GetTree().GetSHA() == "" {
		return "", fmt.Errorf("forge: %s: commit %s: GitHub's answer has no tree", repo, ShortSHA(sha))
	}
	return commit.GetTree().GetSHA(), nil
}

// asAPIError is err's *APIError, or nil.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}
