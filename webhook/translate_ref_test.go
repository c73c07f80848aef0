package webhook

// The encoding/json implementation of Parse and Translate as it stood before
// the scanner replaced it: the reference the differential tests and
// FuzzTranslateMatchesReference hold the scanner-based code to.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// refParse is Parse as encoding/json did it.
func refParse(event string, body []byte) (Meta, error) {
	var m Meta
	switch event {
	case "pull_request", "pull_request_review":
		var p refPRPayload
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.PullRequest != nil {
			m.PRNumber, m.Sha = p.PullRequest.Number, p.PullRequest.Head.Sha
		}
	case "check_suite":
		var p refCheckSuitePayload
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckSuite != nil {
			m.PRNumber, m.Sha = p.CheckSuite.firstPR(), p.CheckSuite.HeadSha
		}
	case "check_run":
		var p refCheckRunPayload
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		if p.CheckRun != nil {
			m.PRNumber, m.Sha = p.CheckRun.firstPR(), p.CheckRun.HeadSha
		}
	case "status":
		var p refStatusPayload
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.Sha
	case "push":
		var p refPushPayload
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
		m.Sha = p.After
	default:
		var p refEnvelope
		if err := refDecode(body, &p); err != nil {
			return m, err
		}
		m = p.meta()
	}
	return m, nil
}

// refDecode unmarshals a payload that must be a JSON object.
func refDecode(body []byte, v any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// envelope holds the fields every App delivery shares.
type refEnvelope struct {
	Action       string `json:"action"`
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Repository *refRepoRef `json:"repository"`
}

// repoRef is a repository as payloads list it.
type refRepoRef struct {
	FullName string `json:"full_name"`
}

func (e refEnvelope) meta() Meta {
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
type refPRPayload struct {
	refEnvelope
	PullRequest *refPullRequest `json:"pull_request"`
	Label       *struct {
		Name string `json:"name"`
	} `json:"label"`
	Changes *struct {
		// Base is present only when the base branch changed.
		Base *json.RawMessage `json:"base"`
	} `json:"changes"`
}

// pullRequest holds the fields eligibility reads.
type refPullRequest struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Draft  bool   `json:"draft"`
	Labels []struct {
		Name string `json:"name"`
	} `json:"labels"`
	// AutoMerge is GitHub's auto-merge request; null when not enabled.
	AutoMerge *struct {
		MergeMethod string `json:"merge_method"`
	} `json:"auto_merge"`
	Head struct {
		Sha string `json:"sha"`
	} `json:"head"`
	Base struct {
		Ref string `json:"ref"`
	} `json:"base"`
}

// check is a check_suite or check_run object.
type refCheck struct {
	HeadSha      string `json:"head_sha"`
	PullRequests []struct {
		Number int `json:"number"`
	} `json:"pull_requests"`
}

// firstPR is the first associated pull request's number, 0 when none (as for
// pull requests from forks).
func (c *refCheck) firstPR() int {
	if len(c.PullRequests) == 0 {
		return 0
	}
	return c.PullRequests[0].Number
}

type refCheckSuitePayload struct {
	refEnvelope
	CheckSuite *refCheck `json:"check_suite"`
}

type refCheckRunPayload struct {
	refEnvelope
	CheckRun *refCheck `json:"check_run"`
}

type refStatusPayload struct {
	refEnvelope
	Sha   string `json:"sha"`
	State string `json:"state"`
}

type refPushPayload struct {
	refEnvelope
	Ref     string `json:"ref"`
	After   string `json:"after"`
	Deleted bool   `json:"deleted"`
}

// installationPayload is an installation or installation_repositories
// delivery.
type refInstallationPayload struct {
	refEnvelope
	Repositories        []refRepoRef `json:"repositories"`
	RepositoriesAdded   []refRepoRef `json:"repositories_added"`
	RepositoriesRemoved []refRepoRef `json:"repositories_removed"`
}

// refTranslate is Translate as encoding/json did it.
func refTranslate(d leasedo.Delivery, opt rules.Options) (Translation, error) {
	switch d.Event {
	case "pull_request":
		return refTranslatePullRequest(d, opt)
	case "pull_request_review":
		return refTranslateReview(d)
	case "check_suite", "check_run":
		return refTranslateCheck(d)
	case "status":
		return refTranslateStatus(d)
	case "push":
		return refTranslatePush(d)
	case "installation", "installation_repositories":
		return refTranslateInstallation(d)
	}
	// Anything else (ping included) is still a JSON object we stored.
	if err := refDecode(d.Body, &refEnvelope{}); err != nil {
		return Translation{}, err
	}
	return Translation{Ignored: fmt.Sprintf("event type %s is not acted on", quoted(d.Event))}, nil
}

func refTranslatePullRequest(d leasedo.Delivery, opt rules.Options) (Translation, error) {
	var p refPRPayload
	if err := refDecode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	pr := p.PullRequest
	if pr == nil || pr.Number <= 0 {
		return Translation{}, fmt.Errorf("%w: pull_request delivery has no pull_request.number", ErrMalformed)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	t := Translation{Base: pr.Base.Ref}
	notEligible := refIneligibility(pr, opt)
	one := func(reason string) (Translation, error) {
		ev := event(d, p.Action, pr.Number, pr.Head.Sha, reason)
		ev.Details.Base = pr.Base.Ref
		if pr.AutoMerge != nil {
			ev.Details.MergeMethod = pr.AutoMerge.MergeMethod
		}
		t.Events = []leasedo.Event{ev}
		return t, nil
	}
	switch p.Action {
	case "opened", "reopened", "ready_for_review", "labeled", "auto_merge_enabled":
		if notEligible != "" {
			t.Ignored = "not eligible: " + notEligible
			return t, nil
		}
		return one("")
	case "closed":
		return one("pull request closed")
	case "unlabeled", "auto_merge_disabled", "converted_to_draft":
		if notEligible == "" {
			t.Ignored = "still eligible after " + p.Action
			return t, nil
		}
		return one("no longer eligible: " + notEligible)
	case "synchronize":
		return one("new head")
	case "edited":
		if p.Changes == nil || p.Changes.Base == nil {
			t.Ignored = "edited without a base change"
			return t, nil
		}
		return one("base branch changed")
	}
	t.Ignored = fmt.Sprintf("pull_request action %s is not acted on", quoted(p.Action))
	return t, nil
}

func refIneligibility(pr *refPullRequest, opt rules.Options) string {
	e := rules.Eligibility{State: pr.State, Draft: pr.Draft, AutoMerge: pr.AutoMerge != nil}
	for _, l := range pr.Labels {
		e.Labels = append(e.Labels, l.Name)
	}
	return rules.Ineligibility(e, opt)
}

func refTranslateReview(d leasedo.Delivery) (Translation, error) {
	var p refPRPayload
	if err := refDecode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	if p.Action != "submitted" && p.Action != "dismissed" {
		return Translation{Ignored: fmt.Sprintf("pull_request_review action %s is not acted on", quoted(p.Action))}, nil
	}
	pr := p.PullRequest
	if pr == nil || pr.Number <= 0 || pr.Head.Sha == "" {
		return Translation{}, fmt.Errorf("%w: pull_request_review delivery has no pull_request number and head sha", ErrMalformed)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	return Translation{
		Events: []leasedo.Event{event(d, p.Action, pr.Number, pr.Head.Sha, "")},
		Base:   pr.Base.Ref,
	}, nil
}

func refTranslateCheck(d leasedo.Delivery) (Translation, error) {
	var (
		action string
		c      *refCheck
	)
	if d.Event == "check_suite" {
		var p refCheckSuitePayload
		if err := refDecode(d.Body, &p); err != nil {
			return Translation{}, err
		}
		action, c = p.Action, p.CheckSuite
	} else {
		var p refCheckRunPayload
		if err := refDecode(d.Body, &p); err != nil {
			return Translation{}, err
		}
		action, c = p.Action, p.CheckRun
	}
	if action != "completed" {
		return Translation{Ignored: fmt.Sprintf("%s action %s is not acted on", d.Event, quoted(action))}, nil
	}
	if c == nil || c.HeadSha == "" {
		return Translation{}, fmt.Errorf("%w: %s delivery has no head_sha", ErrMalformed, d.Event)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	return Translation{Events: []leasedo.Event{event(d, action, c.firstPR(), c.HeadSha, "")}}, nil
}

// translateStatus sends every status (pending included) for re-evaluation.
// A status payload has no action: the event's action is the status state
// (pending, success, failure, error), which reads well in the events log.
func refTranslateStatus(d leasedo.Delivery) (Translation, error) {
	var p refStatusPayload
	if err := refDecode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	if p.Sha == "" {
		return Translation{}, fmt.Errorf("%w: status delivery has no sha", ErrMalformed)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	return Translation{Events: []leasedo.Event{event(d, p.State, 0, p.Sha, "")}}, nil
}

func refTranslatePush(d leasedo.Delivery) (Translation, error) {
	var p refPushPayload
	if err := refDecode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	switch {
	case !ok:
		return Translation{Ignored: fmt.Sprintf("push to %s is not a branch push", quoted(p.Ref))}, nil
	case p.Deleted || strings.Trim(p.After, "0") == "":
		return Translation{Ignored: "branch " + branch + " was deleted"}, nil
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	return Translation{Push: &Push{Repo: d.Repo, Ref: branch, After: p.After}}, nil
}

func refTranslateInstallation(d leasedo.Delivery) (Translation, error) {
	var p refInstallationPayload
	if err := refDecode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	tenant := d.Tenant
	if tenant == "" {
		tenant = p.meta().Tenant
	}
	if tenant == "" {
		return Translation{}, fmt.Errorf("%w: %s delivery has no installation id", ErrMalformed, d.Event)
	}
	ch := &InstallChange{Tenant: tenant, Action: p.Action}
	switch d.Event + "/" + p.Action {
	case "installation/created":
		ch.Added = refFullNames(p.Repositories)
	case "installation/deleted":
		ch.Removed = refFullNames(p.Repositories)
	case "installation/suspend", "installation/unsuspend", "installation/new_permissions_accepted":
	case "installation_repositories/added", "installation_repositories/removed":
		ch.Added = refFullNames(p.RepositoriesAdded)
		ch.Removed = refFullNames(p.RepositoriesRemoved)
	default:
		return Translation{Ignored: fmt.Sprintf("%s action %s is not acted on", d.Event, quoted(p.Action))}, nil
	}
	return Translation{Install: ch}, nil
}

// fullNames lists the repositories' full names, skipping blank ones.
func refFullNames(repos []refRepoRef) []string {
	var out []string
	for _, r := range repos {
		if r.FullName != "" {
			out = append(out, r.FullName)
		}
	}
	return out
}
