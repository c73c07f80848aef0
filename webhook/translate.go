package webhook

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// Translation is what one stored delivery asks of mergegate.
type Translation struct {
	// Events are the queue events for the delivery's (tenant, repo), in order.
	Events []leasedo.Event
	// Install is set for installation and installation_repositories.
	Install *InstallChange
	// Push is set for a push to a branch.
	Push *Push
	// Ignored, when non-empty, says why nothing acts on this delivery; the
	// caller still writes it to the events log.
	Ignored string
	// Base is the pull request's base branch when known (pull_request).
	Base string
}

// InstallChange is an installation or installation_repositories delivery.
type InstallChange struct {
	Tenant string
	// Action is created, deleted, suspend, unsuspend,
	// new_permissions_accepted (installation), added or removed
	// (installation_repositories).
	Action string
	// Added lists full names to track: installation created, repositories
	// added. Removed lists full names to forget: installation deleted,
	// repositories removed.
	Added, Removed []string
}

// Push is a push to a branch.
type Push struct {
	Repo  string
	Ref   string // branch name, without refs/heads/
	After string // the branch's new head sha
}

// Translate turns a stored delivery into /event calls and the other
// changes it asks for (docs/queue.md). Events carry the delivery's Tenant and Repo.
// Checks are never trusted from a payload: gate events carry no gateResult,
// the gate is read from GitHub later. An error wraps ErrMalformed.
//
// opt.Of(tenant, repo) gives each repository's own triggers (its
// .github/mergegate.yml): a join is decided under them, and its priority
// taken from its labels (priority_labels).
func Translate(d leasedo.Delivery, opt rules.Options) (Translation, error) {
	opt = opt.Of(d.Tenant, d.Repo)
	switch d.Event {
	case "pull_request":
		return translatePullRequest(d, opt)
	case "pull_request_review":
		return translateReview(d)
	case "check_suite", "check_run":
		return translateCheck(d)
	case "status":
		return translateStatus(d)
	case "push":
		return translatePush(d)
	case "issue_comment":
		return translateIssueComment(d)
	case "merge_group":
		return translateMergeGroup(d)
	case "installation", "installation_repositories":
		return translateInstallation(d)
	}
	// Anything else (ping included) is still a JSON object we stored.
	if err := decode(d.Body, &envelope{}); err != nil {
		return Translation{}, err
	}
	return Translation{Ignored: fmt.Sprintf("event type %s is not acted on", quoted(d.Event))}, nil
}

// OpOf maps the /event vocabulary (docs/lease-protocol.md), which is GitHub's event
// types and actions, to the queue operation it asks for. It is the only
// reading of GitHub's action strings; Translate uses it after it has
// checked a delivery's payload (eligibility, a base change).
func OpOf(eventType, action string) leasedo.Op {
	switch eventType {
	case "pull_request":
		switch action {
		case "opened", "reopened", "ready_for_review", "labeled", "auto_merge_enabled":
			return leasedo.OpJoin
		case "closed", "unlabeled", "auto_merge_disabled", "converted_to_draft":
			return leasedo.OpLeave
		case "synchronize", "edited":
			return leasedo.OpReevaluate
		case "enqueued", "dequeued":
			// GitHub's merge queue took it or let it go: read it again
			// (where it stands in the queue, why it left: from GitHub).
			return leasedo.OpRecheck
		}
	case "merge_group":
		switch action {
		case "checks_requested", "destroyed":
			// The group's ref names the pull request but not its head:
			// labels is the op that reads an entry again by its number
			// (with no priority given it changes nothing else).
			return leasedo.OpLabels
		}
	case "check_suite", "check_run", "status", "pull_request_review":
		return leasedo.OpRecheck
	case "issue_comment":
		if action == "created" {
			return leasedo.OpCommand
		}
	}
	return leasedo.OpIgnore
}

// event builds one queue event for the delivery's (tenant, repo).
func event(d leasedo.Delivery, action string, pr int, sha, reason string) leasedo.Event {
	return leasedo.Event{
		EventType: d.Event,
		Tenant:    d.Tenant,
		Repo:      d.Repo,
		Action:    action,
		PRNumber:  pr,
		Details:   &leasedo.Details{Sha: sha, Reason: reason},
		Op:        OpOf(d.Event, action),
	}
}

// needRepo rejects a repository-scoped delivery that names no repository.
func needRepo(d leasedo.Delivery) error {
	if d.Repo == "" {
		return fmt.Errorf("%w: %s delivery has no repository", ErrMalformed, d.Event)
	}
	return nil
}

func translatePullRequest(d leasedo.Delivery, opt rules.Options) (Translation, error) {
	var p prPayload
	if err := decode(d.Body, &p); err != nil {
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
	notEligible := ineligibility(pr, opt)
	one := func(reason string) (Translation, error) {
		ev := event(d, p.Action, pr.Number, pr.Head.Sha, reason)
		ev.Details.Base = pr.Base.Ref
		if pr.AutoMerge != nil {
			ev.Details.MergeMethod = pr.AutoMerge.MergeMethod
		}
		t.Events = []leasedo.Event{ev}
		return t, nil
	}
	withPriority := func(tr Translation, err error) (Translation, error) {
		if err == nil && len(opt.PriorityLabels) > 0 && len(tr.Events) == 1 {
			rank, name := rules.PriorityOf(opt.PriorityLabels, labelNames(pr))
			tr.Events[0].Details.Priority, tr.Events[0].Details.PriorityName = &rank, name
		}
		return tr, err
	}
	switch p.Action {
	case "opened", "reopened", "ready_for_review", "labeled", "auto_merge_enabled":
		if notEligible != "" {
			if ev, ok := headMove(d, pr.Number, pr.Base.Ref, p.senderLogin(), broughtBack(p.Action), leasedo.NoConsent, pr.Head.Sha); ok && broughtBack(p.Action) != "" && pr.State == "open" {
				// Not queued: who brought it back on this head is kept a
				// while all the same, for a writer's @mergegate queue
				// (rules.QueueConsents).
				t.Events = []leasedo.Event{ev}
				return t, nil
			}
			t.Ignored = "not eligible: " + notEligible
			return t, nil
		}
		tr, err := withPriority(one(""))
		if err != nil {
			return tr, err
		}
		trigger := p.Action == "labeled" && p.Label != nil && rules.HasLabel(opt.Labels(), p.Label.Name)
		switch {
		case trigger || p.Action == "auto_merge_enabled":
			// A writer's consent (GitHub lets only writers enable
			// auto-merge), for this head, even when already queued.
			tr.Events[0].Details.Consent = leasedo.ConsentGiven
		case broughtBack(p.Action) != "":
			// Back on whatever head it has now: the label was given on an
			// earlier one. Consent only once the sync knows who did it.
			tr.Events[0].Details.Consent = leasedo.ConsentPending
			if ev, ok := headMove(d, pr.Number, pr.Base.Ref, p.senderLogin(), broughtBack(p.Action), leasedo.NoConsent, pr.Head.Sha); ok {
				tr.Events = append(tr.Events, ev)
			}
		}
		if trigger {
			if ev, ok := labelCheck(d, pr.Number, p.senderLogin(), opt); ok {
				tr.Events = append(tr.Events, ev)
			}
		}
		return tr, nil
	case "closed":
		return one("pull request closed")
	case "unlabeled", "auto_merge_disabled", "converted_to_draft":
		if notEligible == "" && p.Action == "unlabeled" && p.Label != nil &&
			(rules.HasLabel(opt.PriorityLabels, p.Label.Name) || rules.HasLabel(opt.BlockingLabels, p.Label.Name)) {
			// Still eligible, but a blocking or priority label went.
			tr, err := withPriority(one("labels changed"))
			tr.Events[0].Op = leasedo.OpLabels
			return tr, err
		}
		if notEligible == "" {
			t.Ignored = "still eligible after " + p.Action
			return t, nil
		}
		return one("no longer eligible: " + notEligible)
	case "synchronize":
		tr, err := one("new head")
		// Who pushed: for the consent of a queued pull request, and, of
		// one not queued (eligible or not), kept a while for a writer's
		// `@mergegate queue` written before the push and carried out
		// after it (rules.QueueConsents).
		if ev, ok := headMove(d, pr.Number, pr.Base.Ref, p.senderLogin(), rules.MovePush, p.Before, pr.Head.Sha); ok && err == nil {
			tr.Events = append(tr.Events, ev)
		}
		return tr, err
	case "enqueued":
		return one("added to GitHub's merge queue")
	case "dequeued":
		// The reason is GitHub's; the sync reads it again from GitHub
		// (RemovedFromMergeQueueEvent), as it reads gates, and decides.
		return one("removed from GitHub's merge queue: " + quoted(p.Reason))
	case "edited":
		if p.Changes == nil || !p.Changes.Base {
			t.Ignored = "edited without a base change"
			return t, nil
		}
		tr, err := one("base branch changed")
		if ev, ok := headMove(d, pr.Number, pr.Base.Ref, p.senderLogin(), rules.MoveBase, pr.Head.Sha, pr.Head.Sha); ok && err == nil {
			tr.Events = append(tr.Events, ev)
		}
		return tr, err
	}
	t.Ignored = fmt.Sprintf("pull_request action %s is not acted on", quoted(p.Action))
	return t, nil
}

// broughtBack is the kind of head move of a pull_request action that
// brings a pull request back on whatever head it has ("" for others).
func broughtBack(action string) string {
	switch action {
	case "reopened":
		return rules.MoveOpen
	case "ready_for_review":
		return rules.MoveReady
	}
	return ""
}

// HeadMoveCommand is the command of the event that has the sync check who
// moved a pull request's head (pushed, reopened it, marked it ready,
// changed its base) before a writer's consent covers the new head; its
// arg is the kind, the head before and the head after (HeadMoveArg).
const HeadMoveCommand = "head"

// headMove is the HeadMoveCommand event for a move by sender (none when
// the delivery names no sender: the consent then stays where it was).
func headMove(d leasedo.Delivery, pr int, base, sender, kind, before, after string) (leasedo.Event, bool) {
	if sender == "" || after == "" {
		return leasedo.Event{}, false
	}
	if before == "" {
		before = leasedo.NoConsent
	}
	return leasedo.Event{EventType: d.Event, Tenant: d.Tenant, Repo: d.Repo, Action: d.Action, PRNumber: pr, Op: leasedo.OpCommand,
		Details: &leasedo.Details{Command: HeadMoveCommand, Arg: HeadMoveArg(kind, before, after), By: sender, Sha: after, Base: base,
			Reason: "@" + sender + " moved the head to " + after}}, true
}

// HeadMoveArg is a HeadMoveCommand's arg; ParseHeadMove reads it back.
func HeadMoveArg(kind, before, after string) string { return kind + " " + before + " " + after }

// ParseHeadMove reads a HeadMoveCommand's arg (ok false when it is not one).
func ParseHeadMove(arg string) (kind, before, after string, ok bool) {
	f := strings.Fields(arg)
	if len(f) != 3 {
		return "", "", "", false
	}
	return f[0], f[1], f[2], true
}

// mergeGroupRef is a merge group's head ref:
// refs/heads/gh-readonly-queue/<base>/pr-<number>-<sha> (the base may hold
// slashes).
var mergeGroupRef = regexp.MustCompile(`^refs/heads/gh-readonly-queue/(.+)/pr-([0-9]+)-[0-9a-f]+$`)

// translateMergeGroup: GitHub's merge queue made a merge group for a pull
// request (checks_requested) or dropped it (destroyed: merged, dequeued,
// invalidated by an entry ahead leaving). Either way the pull request's
// entry is read again; what happened is read from GitHub.
func translateMergeGroup(d leasedo.Delivery) (Translation, error) {
	var p mergeGroupPayload
	if err := decode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	if p.Action != "checks_requested" && p.Action != "destroyed" {
		return Translation{Ignored: fmt.Sprintf("merge_group action %s is not acted on", quoted(p.Action))}, nil
	}
	if p.MergeGroup == nil {
		return Translation{}, fmt.Errorf("%w: merge_group delivery has no merge_group", ErrMalformed)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	m := mergeGroupRef.FindStringSubmatch(p.MergeGroup.HeadRef)
	n := 0
	if m != nil {
		n, _ = strconv.Atoi(m[2])
	}
	if n <= 0 {
		return Translation{Ignored: fmt.Sprintf("merge group ref %s names no pull request", quoted(p.MergeGroup.HeadRef))}, nil
	}
	reason := "merge group checks requested"
	if p.Action == "destroyed" {
		reason = "merge group destroyed: " + quoted(p.Reason)
	}
	return Translation{Base: m[1], Events: []leasedo.Event{event(d, p.Action, n, "", reason)}}, nil
}

func ineligibility(pr *pullRequest, opt rules.Options) string {
	e := rules.Eligibility{State: pr.State, Draft: pr.Draft, Base: pr.Base.Ref, AutoMerge: pr.AutoMerge != nil, Labels: labelNames(pr)}
	return rules.Ineligibility(e, opt)
}

func labelNames(pr *pullRequest) []string {
	out := make([]string, 0, len(pr.Labels))
	for _, l := range pr.Labels {
		out = append(out, l.Name)
	}
	return out
}

func translateReview(d leasedo.Delivery) (Translation, error) {
	var p prPayload
	if err := decode(d.Body, &p); err != nil {
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
	ev := event(d, p.Action, pr.Number, pr.Head.Sha, "")
	ev.Details.Approved = p.Action == "submitted" && p.Review != nil && strings.EqualFold(p.Review.State, "approved")
	return Translation{Events: []leasedo.Event{ev}, Base: pr.Base.Ref}, nil
}

func translateCheck(d leasedo.Delivery) (Translation, error) {
	var (
		action string
		c      *check
	)
	if d.Event == "check_suite" {
		var p checkSuitePayload
		if err := decode(d.Body, &p); err != nil {
			return Translation{}, err
		}
		action, c = p.Action, p.CheckSuite
	} else {
		var p checkRunPayload
		if err := decode(d.Body, &p); err != nil {
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
	ev := event(d, action, c.firstPR(), c.HeadSha, "")
	if d.Event == "check_run" {
		ev.Details.Check = c.Name
	}
	return Translation{Events: []leasedo.Event{ev}}, nil
}

// translateStatus sends every status (pending included) for re-evaluation.
// A status payload has no action: the event's action is the status state
// (pending, success, failure, error), which reads well in the events log.
func translateStatus(d leasedo.Delivery) (Translation, error) {
	var p statusPayload
	if err := decode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	if p.Sha == "" {
		return Translation{}, fmt.Errorf("%w: status delivery has no sha", ErrMalformed)
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	ev := event(d, p.State, 0, p.Sha, "")
	if p.State != "pending" {
		ev.Details.Check = p.Context
	}
	return Translation{Events: []leasedo.Event{ev}}, nil
}

func translatePush(d leasedo.Delivery) (Translation, error) {
	var p pushPayload
	if err := decode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	switch {
	case !ok:
		return Translation{Ignored: fmt.Sprintf("push to %s is not a branch push", quoted(p.Ref))}, nil
	case strings.HasPrefix(branch, leasedo.BranchPrefix), strings.HasPrefix(branch, leasedo.BuildBranchPrefix):
		// A merge train's branch (mergegate/<base>/<id>, or the one it is
		// built on): mergegate made it and reads its checks through their
		// own events.
		return Translation{Ignored: "push to mergegate's own branch " + branch}, nil
	case p.Deleted || strings.Trim(p.After, "0") == "":
		return Translation{Ignored: "branch " + branch + " was deleted"}, nil
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	t := Translation{Push: &Push{Repo: d.Repo, Ref: branch, After: p.After}}
	if p.Repository != nil && branch == p.Repository.DefaultBranch && touches(p, PolicyPath) {
		// Read the repository's policy again (an organisation's .github
		// repository: every repository of the owner that falls back on it).
		t.Events = []leasedo.Event{{EventType: d.Event, Tenant: d.Tenant, Repo: d.Repo, Action: d.Action, Op: leasedo.OpPolicy,
			Details: &leasedo.Details{Sha: p.After, Base: branch, Reason: "push to " + branch + " touches " + PolicyPath}}}
	}
	return t, nil
}

// PolicyPath is a repository's policy file (package policy's Path).
const PolicyPath = ".github/mergegate.yml"

// touches reports whether the push added, modified or removed path. A
// push that lists no commits (GitHub leaves them out of some forced
// pushes) may have: it counts as touching it.
func touches(p pushPayload, path string) bool {
	if len(p.Commits) == 0 {
		return p.Forced
	}
	for _, c := range p.Commits {
		for _, list := range [][]string{c.Added, c.Modified, c.Removed} {
			for _, f := range list {
				if f == path {
					return true
				}
			}
		}
	}
	return false
}

func translateInstallation(d leasedo.Delivery) (Translation, error) {
	var p installationPayload
	if err := decode(d.Body, &p); err != nil {
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
		ch.Added = fullNames(p.Repositories)
	case "installation/deleted":
		ch.Removed = fullNames(p.Repositories)
	case "installation/suspend", "installation/unsuspend", "installation/new_permissions_accepted":
	case "installation_repositories/added", "installation_repositories/removed":
		ch.Added = fullNames(p.RepositoriesAdded)
		ch.Removed = fullNames(p.RepositoriesRemoved)
	default:
		return Translation{Ignored: fmt.Sprintf("%s action %s is not acted on", d.Event, quoted(p.Action))}, nil
	}
	return Translation{Install: ch}, nil
}

// fullNames lists the repositories' full names, skipping blank ones.
func fullNames(repos []repoRef) []string {
	var out []string
	for _, r := range repos {
		if r.FullName != "" {
			out = append(out, r.FullName)
		}
	}
	return out
}

// quoted names a value from a payload in a reason; an empty one shows as "".
func quoted(s string) string {
	if s == "" {
		return `""`
	}
	return s
}
