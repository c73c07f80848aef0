package webhook

import (
	"errors"
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
		if err := decode(body, prFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.PullRequest != nil {
			m.PRNumber, m.Sha = p.PullRequest.Number, p.PullRequest.Head.Sha
		}
	case "check_suite":
		var p checkSuitePayload
		if err := decode(body, checkSuiteFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckSuite != nil {
			m.PRNumber, m.Sha = p.CheckSuite.firstPR(), p.CheckSuite.HeadSha
		}
	case "check_run":
		var p checkRunPayload
		if err := decode(body, checkRunFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckRun != nil {
			m.PRNumber, m.Sha = p.CheckRun.firstPR(), p.CheckRun.HeadSha
		}
	case "status":
		var p statusPayload
		if err := decode(body, statusFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.Sha
	case "push":
		var p pushPayload
		if err := decode(body, pushFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.After
	default:
		var p envelope
		if err := decode(body, envelopeFields, &p); err != nil {
			return m, err
		}
		m = p.meta()
	}
	return m, nil
}

// The payloads' structs keep the shape (pointers, slices, embedding) of
// the encoding/json structs they replace, so that null, a missing field
// and a repeated key mean what they meant. Each lists the JSON names of
// its fields; decodeField decodes field i.

// envelope holds the fields every App delivery shares.
type envelope struct {
	Action       string
	Installation *installationRef
	Repository   *repoRef
}

var envelopeFields = []string{"action", "installation", "repository"}

func (e *envelope) decodeField(s *scanner, i int) error {
	switch i {
	case 0:
		return s.stringField(&e.Action, "action")
	case 1:
		return pointerField(s, &e.Installation, installationFields, "installation")
	default:
		return pointerField(s, &e.Repository, repoFields, "repository")
	}
}

// installationRef is the installation a delivery is for.
type installationRef struct {
	ID int64
}

var installationFields = []string{"id"}

func (r *installationRef) decodeField(s *scanner, _ int) error {
	return s.intField(&r.ID, 64, "installation.id")
}

// repoRef is a repository as payloads list it.
type repoRef struct {
	FullName string
}

var repoFields = []string{"full_name"}

func (r *repoRef) decodeField(s *scanner, _ int) error {
	return s.stringField(&r.FullName, "full_name")
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

// withEnvelope lists an envelope's fields, then a payload's own.
func withEnvelope(names ...string) []string {
	return append(envelopeFields[:len(envelopeFields):len(envelopeFields)], names...)
}

// prPayload is a pull_request or pull_request_review delivery.
type prPayload struct {
	envelope
	PullRequest *pullRequest
	Label       *labelRef
	Changes     *prChanges
}

var prFields = withEnvelope("pull_request", "label", "changes")

func (p *prPayload) decodeField(s *scanner, i int) error {
	switch i {
	case 3:
		return pointerField(s, &p.PullRequest, pullRequestFields, "pull_request")
	case 4:
		return pointerField(s, &p.Label, namedFields, "label")
	case 5:
		return pointerField(s, &p.Changes, changesFields, "changes")
	}
	return p.envelope.decodeField(s, i)
}

// named is an object of which only the name is read (a label).
type named struct {
	Name string
}

var namedFields = []string{"name"}

func (n *named) decodeField(s *scanner, _ int) error {
	return s.stringField(&n.Name, "name")
}

// labelRef is the label a labeled or unlabeled delivery names: its name
// is only checked (a string or null), never read.
type labelRef struct{}

func (*labelRef) decodeField(s *scanner, _ int) error {
	return s.stringField(nil, "label.name")
}

type prChanges struct {
	// Base is whether changes.base is there (and not null): only when the
	// base branch changed.
	Base bool
}

var changesFields = []string{"base"}

func (c *prChanges) decodeField(s *scanner, _ int) error {
	return s.presentField(&c.Base)
}

// pullRequest holds the fields eligibility reads.
type pullRequest struct {
	Number int
	State  string
	Draft  bool
	Labels []named
	// AutoMerge is GitHub's auto-merge request; null when not enabled.
	AutoMerge *autoMerge
	Head      headRef
	Base      baseRef
}

var pullRequestFields = []string{"number", "state", "draft", "labels", "auto_merge", "head", "base"}

func (pr *pullRequest) decodeField(s *scanner, i int) error {
	switch i {
	case 0:
		return s.goIntField(&pr.Number, "pull_request.number")
	case 1:
		return s.stringField(&pr.State, "pull_request.state")
	case 2:
		return s.boolField(&pr.Draft, "pull_request.draft")
	case 3:
		return sliceField(s, &pr.Labels, namedFields, "pull_request.labels")
	case 4:
		return pointerField(s, &pr.AutoMerge, autoMergeFields, "pull_request.auto_merge")
	case 5:
		return s.structField(headFields, &pr.Head, "pull_request.head")
	default:
		return s.structField(baseFields, &pr.Base, "pull_request.base")
	}
}

// autoMerge is GitHub's auto-merge request: that it is not null makes the
// pull request eligible; its method is what its author chose.
type autoMerge struct {
	MergeMethod string
}

var autoMergeFields = []string{"merge_method"}

func (a *autoMerge) decodeField(s *scanner, _ int) error {
	return s.stringField(&a.MergeMethod, "auto_merge.merge_method")
}

type headRef struct {
	Sha string
}

var headFields = []string{"sha"}

func (h *headRef) decodeField(s *scanner, _ int) error {
	return s.stringField(&h.Sha, "head.sha")
}

type baseRef struct {
	Ref string
}

var baseFields = []string{"ref"}

func (b *baseRef) decodeField(s *scanner, _ int) error {
	return s.stringField(&b.Ref, "base.ref")
}

// check is a check_suite or check_run object.
type check struct {
	HeadSha      string
	PullRequests []prNumber
}

var checkFields = []string{"head_sha", "pull_requests"}

func (c *check) decodeField(s *scanner, i int) error {
	if i == 0 {
		return s.stringField(&c.HeadSha, "head_sha")
	}
	return sliceField(s, &c.PullRequests, prNumberFields, "pull_requests")
}

type prNumber struct {
	Number int
}

var prNumberFields = []string{"number"}

func (p *prNumber) decodeField(s *scanner, _ int) error {
	return s.goIntField(&p.Number, "pull_requests.number")
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
	CheckSuite *check
}

var checkSuiteFields = withEnvelope("check_suite")

func (p *checkSuitePayload) decodeField(s *scanner, i int) error {
	if i == 3 {
		return pointerField(s, &p.CheckSuite, checkFields, "check_suite")
	}
	return p.envelope.decodeField(s, i)
}

type checkRunPayload struct {
	envelope
	CheckRun *check
}

var checkRunFields = withEnvelope("check_run")

func (p *checkRunPayload) decodeField(s *scanner, i int) error {
	if i == 3 {
		return pointerField(s, &p.CheckRun, checkFields, "check_run")
	}
	return p.envelope.decodeField(s, i)
}

type statusPayload struct {
	envelope
	Sha   string
	State string
}

var statusFields = withEnvelope("sha", "state")

func (p *statusPayload) decodeField(s *scanner, i int) error {
	switch i {
	case 3:
		return s.stringField(&p.Sha, "sha")
	case 4:
		return s.stringField(&p.State, "state")
	}
	return p.envelope.decodeField(s, i)
}

type pushPayload struct {
	envelope
	Ref     string
	After   string
	Deleted bool
}

var pushFields = withEnvelope("ref", "after", "deleted")

func (p *pushPayload) decodeField(s *scanner, i int) error {
	switch i {
	case 3:
		return s.stringField(&p.Ref, "ref")
	case 4:
		return s.stringField(&p.After, "after")
	case 5:
		return s.boolField(&p.Deleted, "deleted")
	}
	return p.envelope.decodeField(s, i)
}

// installationPayload is an installation or installation_repositories
// delivery.
type installationPayload struct {
	envelope
	Repositories        []repoRef
	RepositoriesAdded   []repoRef
	RepositoriesRemoved []repoRef
}

var installationPayloadFields = withEnvelope("repositories", "repositories_added", "repositories_removed")

func (p *installationPayload) decodeField(s *scanner, i int) error {
	switch i {
	case 3:
		return sliceField(s, &p.Repositories, repoFields, "repositories")
	case 4:
		return sliceField(s, &p.RepositoriesAdded, repoFields, "repositories_added")
	case 5:
		return sliceField(s, &p.RepositoriesRemoved, repoFields, "repositories_removed")
	}
	return p.envelope.decodeField(s, i)
}
