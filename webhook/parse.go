package webhook

import (
	"bytes"
	"errors"
	"fmt"
	json "github.com/segmentio/encoding/json"
	"strconv"
)

// ErrMalformed is wrapped by every error about a payload's content (not JSON,
// not an object, a field of the wrong type, a required object missing). Such
// a delivery is bad input: retrying it cannot succeed.
var ErrMalformed = errors.New("malformed payload")

// Meta is what the handler and the logs need from a payload, read without
// decoding GitHub's full types.
type Meta struct {
	Action   string // payload.action ("" for status, push, ping)
	Tenant   string // installation.id as a decimal string; "" when absent
	Repo     string // repository.full_name; "" for installation-level events
	PRNumber int    // pull_request.number, or the first of check_*.pull_requests; 0 when unknown
	Sha      string // the head sha the event is about; "" when none
}

// Parse reads the fields of Meta from a payload of the given event type.
// Only the fields mergegate reads are decoded, so an unknown event type
// with unusual fields still parses. It fails (wrapping ErrMalformed) when
// body is not a JSON object or a field it reads has the wrong type.
func Parse(event string, body []byte) (Meta, error) {
	var m Meta
	switch event {
	case "pull_request", "pull_request_review":
		var p prPayload
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.PullRequest != nil {
			m.PRNumber, m.Sha = p.PullRequest.Number, p.PullRequest.Head.Sha
		}
	case "check_suite":
		var p checkSuitePayload
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckSuite != nil {
			m.PRNumber, m.Sha = p.CheckSuite.firstPR(), p.CheckSuite.HeadSha
		}
	case "check_run":
		var p checkRunPayload
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckRun != nil {
			m.PRNumber, m.Sha = p.CheckRun.firstPR(), p.CheckRun.HeadSha
		}
	case "status":
		var p statusPayload
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.Sha
	case "push":
		var p pushPayload
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.After
	default:
		var p envelope
		if err := decode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
	}
	return m, nil
}

// decode unmarshals a payload, which must be a JSON object, into v: one of
// the small structs below, which name only the fields mergegate reads (the
// rest of GitHub's 20-30 KB payloads is skipped, though validated). It
// uses github.com/segmentio/encoding/json, which means what encoding/json
// means (decode_test.go holds it to that) and is fast enough on the 202's
// path for ingest to stay above half a bare HMAC handler's rate, a floor
// encoding/json falls short of. Every failure wraps ErrMalformed.
func decode(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// parseEnvelope reads action, tenant and repository of a delivery (the
// ingest path), validating the whole payload.
func parseEnvelope(body []byte) (Meta, error) {
	var e envelope
	if err := decode(body, &e); err != nil {
		return Meta{}, err
	}
	return e.meta(), nil
}

// envelope holds the fields every App delivery shares.
type envelope struct {
	Action       string           `json:"action"`
	Installation *installationRef `json:"installation"`
	Repository   *repoRef         `json:"repository"`
}

// installationRef is the installation a delivery is for.
type installationRef struct {
	ID int64 `json:"id"`
}

// repoRef is a repository as payloads list it.
type repoRef struct {
	FullName string `json:"full_name"`
	// DefaultBranch is read of a push's repository.
	DefaultBranch string `json:"default_branch"`
}

func (e envelope) meta() Meta {
	m := Meta{Action: e.Action}
	if e.Installation != nil && e.Installation.ID != 0 {
		m.Tenant = strconv.FormatInt(e.Installation.ID, 10)
	}
	if e.Repository != nil {
		m.Repo = e.Repository.FullName
	}
	return m
}

// prPayload is a pull_request or pull_request_review delivery.
type prPayload struct {
	envelope
	Sender      *named       `json:"sender"` // only its login is read
	PullRequest *pullRequest `json:"pull_request"`
	Label       *named       `json:"label"` // its name is only checked (a string or null)
	Changes     *prChanges   `json:"changes"`
	// Reason is why GitHub's merge queue let it go (action dequeued).
	Reason string `json:"reason"`
	// Before is the head before a synchronize (its after is the pull
	// request's head).
	Before string `json:"before"`
	// Review is a pull_request_review's review (its state is only
	// compared).
	Review *struct {
		State string `json:"state"`
	} `json:"review"`
}

// mergeGroupPayload is a merge_group delivery: its group's head ref names
// the pull request; reason is destroyed's (merged, invalidated, dequeued).
type mergeGroupPayload struct {
	envelope
	MergeGroup *struct {
		HeadRef string `json:"head_ref"`
		BaseRef string `json:"base_ref"`
	} `json:"merge_group"`
	Reason string `json:"reason"`
}

// named is an object of which only the name (a label) or the login (a
// user) is read.
type named struct {
	Name  string `json:"name"`
	Login string `json:"login"`
}

func (p prPayload) senderLogin() string {
	if p.Sender == nil {
		return ""
	}
	return p.Sender.Login
}

type prChanges struct {
	// Base is whether changes.base is there (and not null): only when the
	// base branch changed.
	Base present `json:"base"`
}

// present is whether a field holds anything but null; its value is not
// read.
type present bool

func (p *present) UnmarshalJSON(b []byte) error {
	*p = string(b) != "null"
	return nil
}

// pullRequest holds the fields eligibility reads.
type pullRequest struct {
	Number int     `json:"number"`
	Title  string  `json:"title"`
	State  string  `json:"state"`
	Draft  bool    `json:"draft"`
	Labels []named `json:"labels"`
	// AutoMerge is GitHub's auto-merge request; null when not enabled.
	AutoMerge *autoMerge `json:"auto_merge"`
	Head      headRef    `json:"head"`
	Base      baseRef    `json:"base"`
}

// autoMerge is GitHub's auto-merge request: that it is not null makes the
// pull request eligible; its method is what its author chose.
type autoMerge struct {
	MergeMethod string `json:"merge_method"`
}

type headRef struct {
	Sha string `json:"sha"`
}

type baseRef struct {
	Ref string `json:"ref"`
}

// check is a check_suite or check_run object (Name: a check run's).
type check struct {
	HeadSha      string     `json:"head_sha"`
	Name         string     `json:"name"`
	PullRequests []prNumber `json:"pull_requests"`
}

type prNumber struct {
	Number int `json:"number"`
}

// firstPR is the first associated pull request's number, 0 when none (as for
// pull requests from forks).
func (c *check) firstPR() int {
	if len(c.PullRequests) == 0 {
		return 0
	}
	return c.PullRequests[0].Number
}

type checkSuitePayload struct {
	envelope
	CheckSuite *check `json:"check_suite"`
}

type checkRunPayload struct {
	envelope
	CheckRun *check `json:"check_run"`
}

type statusPayload struct {
	envelope
	Sha     string `json:"sha"`
	State   string `json:"state"`
	Context string `json:"context"`
}

type pushPayload struct {
	envelope
	Ref     string       `json:"ref"`
	After   string       `json:"after"`
	Deleted bool         `json:"deleted"`
	Forced  bool         `json:"forced"`
	Commits []pushCommit `json:"commits"`
}

// pushCommit lists the files one pushed commit added, removed and
// modified (a webhook delivery lists up to 2,048 commits).
type pushCommit struct {
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Modified []string `json:"modified"`
}

// installationPayload is an installation or installation_repositories
// delivery.
type installationPayload struct {
	envelope
	Repositories        []repoRef `json:"repositories"`
	RepositoriesAdded   []repoRef `json:"repositories_added"`
	RepositoriesRemoved []repoRef `json:"repositories_removed"`
}
