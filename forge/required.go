package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// unprotectedTTL is how long a branch GitHub said has no classic protection
// is taken to have none. A 404 cannot be asked for conditionally, so each
// read costs a rate-limit point, for every queued branch on every pass;
// protection added meanwhile is enforced by GitHub on the merge anyway, and
// its refusal is sorted like any other.
const unprotectedTTL = time.Hour

// errSkipped: the protection was not read (unprotectedTTL).
var errSkipped = errors.New("forge: branch known to be unprotected")

// ForgetRules drops what the Client remembers of branch's protection, so
// that the next RequiredChecks reads it: after GitHub refused a merge, the
// rules may have changed.
func (c *Client) ForgetRules(tenant, repo, branch string) {
	c.unprotected.Delete(tenant + "/" + repo + "@" + branch)
}

// RequiredChecks returns what branch requires before a merge: its classic
// branch protection (GET .../branches/{b}/protection; 404 "Branch not
// protected" = none) united with the rules of the rulesets that apply to
// it (GET .../rules/branches/{b}). Review counts take the larger of the
// two; flags are true when either sets them; check lists are merged in
// order, protection first.
func (c *Client) RequiredChecks(ctx context.Context, tenant, repo, branch string) (Required, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get-branch-protection", tenant, repo)
	if err != nil {
		return Required{}, err
	}
	var req Required
	seen := map[string]bool{}
	add := func(check string, appID *int64) {
		if check == "" {
			return
		}
		if !seen[check] {
			seen[check] = true
			req.Contexts = append(req.Contexts, check)
		}
		// app_id null (omitted) or -1 means any App (or a status) may
		// report it.
		if appID != nil && *appID > 0 {
			if req.AppIDs == nil {
				req.AppIDs = map[string]int64{}
			}
			req.AppIDs[check] = *appID
		}
	}

	var p *github.Protection
	unprotected := tenant + "/" + repo + "@" + branch
	if at, ok := c.unprotected.Load(unprotected); ok && c.cfg.Clock().Sub(at.(time.Time)) < unprotectedTTL {
		err = errSkipped
	} else {
		p, _, err = in.gh.Repositories.GetBranchProtection(ctx, owner, name, branch)
		err = cl.classify(ctx, err, false)
		if IsNotFound(err) || isPlanWithoutProtection(err) {
			c.unprotected.Store(unprotected, c.cfg.Clock())
		} else {
			c.unprotected.Delete(unprotected)
		}
	}
	switch {
	case err == nil:
		if rsc := p.RequiredStatusChecks; rsc != nil {
			req.Configured = true
			req.Strict = rsc.Strict
			if rsc.Checks != nil {
				for _, ch := range *rsc.Checks {
					add(ch.Context, ch.AppID)
				}
			}
			if rsc.Contexts != nil {
				for _, check := range *rsc.Contexts {
					add(check, nil)
				}
			}
		}
		if r := p.RequiredPullRequestReviews; r != nil {
			req.Reviews = r.RequiredApprovingReviewCount
			req.CodeOwners = r.RequireCodeOwnerReviews
		}
		req.Conversations = p.RequiredConversationResolution != nil && p.RequiredConversationResolution.Enabled
		req.LinearHistory = p.RequireLinearHistory != nil && p.RequireLinearHistory.Enabled
	case errors.Is(err, errSkipped), IsNotFound(err), isPlanWithoutProtection(err):
		// No protection (or none on this plan).
	default:
		return Required{}, err
	}

	ctx = withOp(ctx, "repos.get-branch-rules")
	cl.op = "repos.get-branch-rules"
	for page := 1; ; {
		u := fmt.Sprintf("repos/%s/%s/rules/branches/%s?per_page=100&page=%d", owner, name, branch, page)
		hreq, err := in.gh.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return Required{}, err
		}
		var rules []branchRule
		resp, err := in.gh.Do(ctx, hreq, &rules)
		if err = cl.classify(ctx, err, false); err != nil {
			if IsNotFound(err) {
				break // no rulesets on this server (older GHES)
			}
			return Required{}, err
		}
		for _, r := range rules {
			if err := r.applyTo(&req, add); err != nil {
				return Required{}, fmt.Errorf("forge: %s rule of ruleset %d of %s: %w", r.Type, r.RulesetID, repo, err)
			}
		}
		if resp.NextPage == 0 {
			break
		}
		page = resp.NextPage
	}
	return req, nil
}

// branchRule is one rule of GET /repos/{o}/{r}/rules/branches/{b}. It is
// decoded here rather than as go-github's RepositoryRule, which refuses
// the whole answer when GitHub sends a rule type it does not know yet
// (code_scanning, file_path_restriction, ...): those say nothing about
// merging and are skipped.
type branchRule struct {
	Type       string          `json:"type"`
	RulesetID  int64           `json:"ruleset_id"`
	Parameters json.RawMessage `json:"parameters"`
}

func (r branchRule) applyTo(req *Required, add func(string, *int64)) error {
	decode := func(v any) error {
		if len(r.Parameters) == 0 || string(r.Parameters) == "null" {
			return nil
		}
		return json.Unmarshal(r.Parameters, v)
	}
	switch r.Type {
	case "required_status_checks":
		var p github.RequiredStatusChecksRuleParameters
		if err := decode(&p); err != nil {
			return err
		}
		req.Configured = true
		req.Strict = req.Strict || p.StrictRequiredStatusChecksPolicy
		for _, ch := range p.RequiredStatusChecks {
			add(ch.Context, ch.IntegrationID)
		}
	case "pull_request":
		var p github.PullRequestRuleParameters
		if err := decode(&p); err != nil {
			return err
		}
		req.Reviews = max(req.Reviews, p.RequiredApprovingReviewCount)
		req.CodeOwners = req.CodeOwners || p.RequireCodeOwnerReview
		req.Conversations = req.Conversations || p.RequiredReviewThreadResolution
	case "required_linear_history":
		req.LinearHistory = true
	case "merge_queue":
		req.MergeQueue = true
	}
	return nil
}

// isPlanWithoutProtection: private repositories on GitHub Free have no
// branch protection and answer 403 "Upgrade to GitHub Pro...".
func isPlanWithoutProtection(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusForbidden && strings.Contains(ae.Message, "Upgrade to GitHub Pro")
}
