package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// BranchState is what GitHub says of a branch before mergegate deletes
// it: whether it is the repository's default branch, whether classic
// branch protection or a ruleset covers it, and its tip.
type BranchState struct {
	// SHA is the branch's tip; "" when the branch does not exist.
	SHA string
	// Default: the repository's default branch.
	Default bool
	// Protected: classic branch protection covers it.
	Protected bool
	// Ruled: at least one rule of a ruleset applies to it.
	Ruled bool
}

// BranchState reads what decides whether branch may be deleted: the
// repository (GET /repos/{o}/{r}: default_branch), the ref (GET
// .../git/ref/heads/{b}), its classic protection (GET
// .../branches/{b}/protection: 404 "Branch not protected" = none) and the
// rules that apply to it (GET .../rules/branches/{b}: [] = none; 404 on a
// server without rulesets). A branch that does not exist is read no further.
func (c *Client) BranchState(ctx context.Context, tenant, repo, branch string) (BranchState, error) {
	var st BranchState
	sha, err := c.BranchHead(ctx, tenant, repo, branch)
	switch {
	case errors.Is(err, ErrNotFound):
		return st, nil
	case err != nil:
		return st, err
	}
	st.SHA = sha

	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get", tenant, repo)
	if err != nil {
		return st, err
	}
	r, _, err := in.gh.Repositories.Get(ctx, owner, name)
	if err = cl.classify(ctx, err, false); err != nil {
		return st, err
	}
	st.Default = r.GetDefaultBranch() == branch || r.GetDefaultBranch() == ""

	ctx = withOp(ctx, "repos.get-branch-protection")
	cl.op = "repos.get-branch-protection"
	_, _, err = in.gh.Repositories.GetBranchProtection(ctx, owner, name, branch)
	switch err = cl.classify(ctx, err, false); {
	case err == nil:
		st.Protected = true
	case IsNotFound(err), isPlanWithoutProtection(err):
	default:
		return st, err
	}

	ctx = withOp(ctx, "repos.get-branch-rules")
	cl.op = "repos.get-branch-rules"
	req, err := in.gh.NewRequest(http.MethodGet, fmt.Sprintf("repos/%s/%s/rules/branches/%s?per_page=1", owner, name, branch), nil)
	if err != nil {
		return st, err
	}
	var rules []branchRule
	_, err = in.gh.Do(ctx, req, &rules)
	switch err = cl.classify(ctx, err, false); {
	case err == nil:
		st.Ruled = len(rules) > 0
	case IsNotFound(err):
	default:
		return st, err
	}
	return st, nil
}
