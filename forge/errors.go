package forge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
)

// Errors returned by Client are sorted for two audiences:
//
//   - *MergeError is GitHub's refusal of a merge or a branch update (403,
//     405, 409, 422). Its Message is GitHub's own words: RefusalOf sorts it
//     by whose it is to fix, and AuthorMessage turns the author's ones into
//     one sentence.
//   - *RateLimitError, *TransientError and *APIError are for the operator:
//     wait, retry (after re-reading the PR), or fix configuration
//     (permissions, installation, key). Their Error strings carry the
//     operation, tenant and repository for the logs.

// MergeError is GitHub's refusal to merge or update a pull request.
type MergeError struct {
	Op     string // "merge" or "update-branch"
	Repo   string
	Number int
	SHA    string // the sha guard that was sent
	// Status: 405 not mergeable, 409 head moved, 422 validation, 403 not
	// allowed to this App (workflows permission, fork without maintainer
	// edits); rate-limit 403s are *RateLimitError.
	Status  int
	Message string // GitHub's message, e.g. "Pull Request is not mergeable"
}

func (e *MergeError) Error() string {
	return fmt.Sprintf("github %s %s#%d at %s: %d %s", e.Op, e.Repo, e.Number, ShortSHA(e.SHA), e.Status, e.Message)
}

// IsNotMergeable reports whether err is GitHub's 405 answer to a merge:
// the PR cannot be merged as it stands (conflicts, failing or missing
// required checks, reviews, a base branch that moved...).
func IsNotMergeable(err error) bool {
	var me *MergeError
	return errors.As(err, &me) && me.Status == http.StatusMethodNotAllowed
}

// IsHeadModified reports whether err says the PR's head is no longer the
// sha that was sent: 409 on merge, or 422 "expected head sha didn't match"
// on update-branch ("expected head oid" from the GraphQL rebase).
func IsHeadModified(err error) bool {
	var me *MergeError
	if !errors.As(err, &me) {
		return false
	}
	return me.Status == http.StatusConflict ||
		(me.Status == http.StatusUnprocessableEntity && (strings.Contains(strings.ToLower(me.Message), "expected head sha") ||
			strings.Contains(strings.ToLower(me.Message), "expected head oid")))
}

// AuthorMessage returns one sentence for the PR's author when err is
// GitHub's refusal of the pull request as it stands (a *MergeError but a
// 403), and false when the problem is the operator's (rate limits,
// outages, permissions: a 403, even on a merge). The sentence ends with
// one full stop and does not repeat a "GitHub ..." that GitHub's message
// already starts with.
func AuthorMessage(err error) (string, bool) {
	var me *MergeError
	if !errors.As(err, &me) || me.Status == http.StatusForbidden {
		return "", false
	}
	msg := strings.TrimRight(strings.TrimSpace(me.Message), ". ")
	prefixed := func(prefix string) string {
		if msg == "" {
			return prefix + "."
		}
		if strings.HasPrefix(strings.ToLower(msg), "github ") {
			return msg + "."
		}
		return prefix + ": " + msg + "."
	}
	switch {
	case me.Status == http.StatusMethodNotAllowed:
		return prefixed("GitHub refused to merge this pull request"), true
	case IsHeadModified(err):
		return "The head branch changed after its checks passed, so its new commits must pass the checks before it can be merged.", true
	case me.Op == "update-branch":
		return prefixed("GitHub could not update this branch with its base"), true
	default:
		return prefixed("GitHub rejected the merge request"), true
	}
}

// RateLimitError says GitHub rate-limited an installation. Until RetryAt the
// Client sends nothing for that installation and returns this same error.
type RateLimitError struct {
	Tenant    string
	RetryAt   time.Time
	Secondary bool   // secondary (abuse) limit rather than the hourly quota
	GraphQL   bool   // the GraphQL API's own hourly quota, not the REST one
	Status    int    // 403 or 429 (200 for GraphQL's)
	Message   string // GitHub's message, if any
}

func (e *RateLimitError) Error() string {
	kind := "primary"
	switch {
	case e.Secondary:
		kind = "secondary"
	case e.GraphQL:
		kind = "GraphQL"
	}
	s := fmt.Sprintf("github %s rate limit for installation %s (status %d); retry at %s",
		kind, e.Tenant, e.Status, e.RetryAt.UTC().Format(time.RFC3339))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// IsRateLimited reports whether err is a *RateLimitError and returns it.
func IsRateLimited(err error) (*RateLimitError, bool) {
	var rl *RateLimitError
	ok := errors.As(err, &rl)
	return rl, ok
}

// TransientError is a 5xx answer, a timeout or a network failure. The
// request may or may not have taken effect: before retrying a merge, re-read
// the pull request.
type TransientError struct {
	Op      string
	Tenant  string
	Repo    string
	Status  int  // HTTP status, 0 when no answer arrived
	Timeout bool // the request timed out
	Err     error
}

func (e *TransientError) Error() string {
	what := "network error"
	switch {
	case e.Timeout:
		what = "timeout"
	case e.Status != 0:
		what = fmt.Sprintf("status %d", e.Status)
	}
	return fmt.Sprintf("github %s (installation %s, %s): transient %s: %v", e.Op, e.Tenant, e.Repo, what, e.Err)
}

func (e *TransientError) Unwrap() error { return e.Err }

// IsTransient reports whether err is a *TransientError.
func IsTransient(err error) bool {
	var te *TransientError
	return errors.As(err, &te)
}

// APIError is any other non-success answer (401, 403, 404, 422 outside
// merges...): usually something the operator must fix.
type APIError struct {
	Op      string
	Tenant  string
	Repo    string
	Status  int
	Message string
	// Needs is, on a 403, what GitHub says the request needs
	// (X-Accepted-GitHub-Permissions: "administration=read"; sets of
	// them separated by "; "), when it says.
	Needs string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("github %s (installation %s, %s): %d %s", e.Op, e.Tenant, e.Repo, e.Status, e.Message)
	if e.Needs != "" {
		msg += " (GitHub says it needs " + e.Needs + ")"
	}
	return msg
}

// MissingPermission reports whether err is GitHub refusing a request the
// installation's permissions do not cover (403 "Resource not accessible
// by integration"), and what GitHub says the request needs ("" when it
// does not say).
func MissingPermission(err error) (needs string, ok bool) {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(strings.ToLower(ae.Message), "resource not accessible by integration") {
		return "", false
	}
	return ae.Needs, true
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// call describes one Client operation, for error messages.
type call struct {
	op     string
	tenant string
	repo   string
	number int
	sha    string
}

// classify turns what go-github returned into one of the package's errors.
// mergeLike selects *MergeError for 403/405/409/422 answers (a rate-limit
// 403 never gets here: rateGuard made it a *RateLimitError).
func (c call) classify(ctx context.Context, err error, mergeLike bool) error {
	if err == nil {
		return nil
	}
	var rl *RateLimitError
	if errors.As(err, &rl) {
		return rl
	}
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return nil // 202: the job was scheduled; success for our callers
	}
	if ctx.Err() != nil {
		return fmt.Errorf("github %s (installation %s, %s): %w", c.op, c.tenant, c.repo, ctx.Err())
	}
	var ns *notSentError
	if errors.As(err, &ns) {
		return fmt.Errorf("github %s (installation %s, %s): %w", c.op, c.tenant, c.repo, ns)
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		err := c.fromStatus(er.Response.StatusCode, er.Message, err, mergeLike)
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
			ae.Needs = er.Response.Header.Get("X-Accepted-GitHub-Permissions")
		}
		return err
	}
	var he *ghinstallation.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		he.Response.Body.Close() // ghinstallation leaves a failed token answer open
		return c.fromStatus(he.Response.StatusCode, "installation token: "+he.Response.Status, err, false)
	}
	if errors.Is(err, github.ErrBranchNotProtected) {
		return &APIError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: http.StatusNotFound, Message: err.Error()}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &TransientError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Timeout: true, Err: err}
	}
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return &TransientError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Err: err}
	}
	return fmt.Errorf("github %s (installation %s, %s): %w", c.op, c.tenant, c.repo, err)
}

func (c call) fromStatus(status int, msg string, err error, mergeLike bool) error {
	switch {
	case status >= 500:
		return &TransientError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: status, Err: err}
	case mergeLike && (status == http.StatusForbidden || status == http.StatusMethodNotAllowed || status == http.StatusConflict || status == http.StatusUnprocessableEntity):
		return &MergeError{Op: c.op, Repo: c.repo, Number: c.number, SHA: c.sha, Status: status, Message: msg}
	default:
		if msg == "" {
			msg = http.StatusText(status)
		}
		return &APIError{Op: c.op, Tenant: c.tenant, Repo: c.repo, Status: status, Message: msg}
	}
}
