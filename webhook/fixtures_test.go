package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// Head shas and names in the octokit examples.
const (
	shaDotcom  = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	shaGHES    = "14977a7b5485400124827221a04bfb474bcd72d1"
	shaPush    = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
	shaGHESSt  = "4544205a385319fd846d5df4ed2e3b8173529d78"
	shaBefore  = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e" // synchronize's before
	helloWorld = "Codertocat/Hello-World"
)

// bugTrigger makes the examples' "bug" label the trigger, so that their PRs
// (labelled bug, auto_merge null) are eligible.
var bugTrigger = rules.Options{TriggerLabel: "bug", AutoMergeTrigger: true}

// want is what one delivery should produce: the answer, then (when stored)
// the translation. Event reasons are not compared; ignored is a substring.
type want struct {
	status  int
	tenant  string
	repo    string
	events  []leasedo.Event // Tenant and Repo filled from tenant/repo
	ignored string
	install *InstallChange
	push    *Push
	base    string
}

// ev is an expected queue event (tenant and repo filled in by check).
func ev(eventType, action string, pr int, sha string) leasedo.Event {
	return leasedo.Event{EventType: eventType, Action: action, PRNumber: pr, Details: &leasedo.Details{Sha: sha}}
}

// headEv is the expected check of who moved PR n's head (rules.HeadMove).
func headEv(action string, n int, kind, before, after, by string) leasedo.Event {
	return leasedo.Event{EventType: "pull_request", Action: action, PRNumber: n, Op: leasedo.OpCommand,
		Details: &leasedo.Details{Command: HeadMoveCommand, Arg: HeadMoveArg(kind, before, after), By: by, Sha: after}}
}

// injectedTenant is the installation id added to examples that came from
// repository hooks, to check what an App would make of the same payload.
const injectedTenant = "4242"

type fixtureCase struct {
	file    string         // under fixtureDir
	event   string         // X-GitHub-Event
	opt     *rules.Options // nil = bugTrigger
	noInst  bool           // a repository-hook example: 400 as is, then resent with an installation
	want    want
	comment string
}

func fixtureCases() []fixtureCase {
	pr := func(action string, n int, sha string) []leasedo.Event {
		return []leasedo.Event{ev("pull_request", action, n, sha)}
	}
	// A join that is a writer's consent (the trigger label, auto-merge).
	consented := func(action string, n int, sha string) []leasedo.Event {
		e := ev("pull_request", action, n, sha)
		e.Details.Consent = leasedo.ConsentGiven
		return []leasedo.Event{e}
	}
	// A join that is none (reopened, ready for review), and the check of
	// who did it.
	pending := func(action string, n int, sha, kind, by string) []leasedo.Event {
		e := ev("pull_request", action, n, sha)
		e.Details.Consent = leasedo.ConsentPending
		return []leasedo.Event{e, headEv(action, n, kind, leasedo.NoConsent, sha, by)}
	}
	pushed := func(n int, before, after, by string) []leasedo.Event {
		return []leasedo.Event{ev("pull_request", "synchronize", n, after), headEv("synchronize", n, rules.MovePush, before, after, by)}
	}
	stored := func(tenant, repo string) want { return want{status: http.StatusAccepted, tenant: tenant, repo: repo} }
	with := func(w want, f func(*want)) want { f(&w); return w }
	dotcomPR := func(events []leasedo.Event, ignored string) want {
		return with(stored("1", helloWorld), func(w *want) { w.events, w.ignored, w.base = events, ignored, "master" })
	}
	ghesPR := func(events []leasedo.Event, ignored string) want {
		return with(stored("5", helloWorld), func(w *want) { w.events, w.ignored, w.base = events, ignored, "master" })
	}
	injected := func(events []leasedo.Event, ignored string, f ...func(*want)) want {
		w := stored(injectedTenant, helloWorld)
		w.events, w.ignored = events, ignored
		for _, g := range f {
			g(&w)
		}
		return w
	}
	gate := func(eventType, action string, n int, sha string) []leasedo.Event {
		return []leasedo.Event{ev(eventType, action, n, sha)}
	}
	concluded := func(eventType, action string, n int, sha, check string) []leasedo.Event {
		return []leasedo.Event{concludedEv(eventType, action, n, sha, check)}
	}
	def := rules.DefaultOptions()
	ping := want{status: http.StatusOK}

	return []fixtureCase{
		// pull_request (github.com examples: PR #2 labelled "bug", open).
		{file: "pull_request/assigned.payload.json", want: dotcomPR(nil, "assigned is not acted on")},
		{file: "pull_request/assigned.with-organization.payload.json", want: dotcomPR(nil, "assigned is not acted on")},
		{file: "pull_request/closed.payload.json", want: dotcomPR(pr("closed", 2, shaDotcom), "")},
		{file: "pull_request/closed.with-organization.payload.json", want: dotcomPR(pr("closed", 2, shaDotcom), "")},
		{file: "pull_request/converted_to_draft.payload.json", noInst: true,
			want: injected(pr("converted_to_draft", 2, shaDotcom), "", func(w *want) { w.base = "master" })},
		{file: "pull_request/converted_to_draft.with-installation.payload.json", want: dotcomPR(pr("converted_to_draft", 2, shaDotcom), "")},
		{file: "pull_request/converted_to_draft.with-organization.payload.json", noInst: true,
			want: injected(pr("converted_to_draft", 2, shaDotcom), "", func(w *want) { w.base = "master" })},
		{file: "pull_request/labeled.payload.json", want: dotcomPR(consented("labeled", 2, shaDotcom), "")},
		{file: "pull_request/labeled.payload.json", opt: &def, comment: "label bug is not the trigger",
			want: dotcomPR(nil, `not eligible: no "automerge" label and auto-merge is not enabled`)},
		{file: "pull_request/labeled.with-organization.payload.json", want: dotcomPR(consented("labeled", 2, shaDotcom), "")},
		{file: "pull_request/locked.payload.json", want: dotcomPR(nil, "locked is not acted on")},
		{file: "pull_request/locked.with-organization.payload.json", want: dotcomPR(nil, "locked is not acted on")},
		{file: "pull_request/opened.payload.json", want: dotcomPR(pr("opened", 2, shaDotcom), "")},
		{file: "pull_request/opened.payload.json", opt: &def, want: dotcomPR(nil, "not eligible")},
		{file: "pull_request/opened.with-null-body.json", want: dotcomPR(pr("opened", 2, shaDotcom), "")},
		{file: "pull_request/opened.with-organization.payload.json", want: dotcomPR(pr("opened", 2, shaDotcom), "")},
		{file: "pull_request/ready_for_review.payload.json", noInst: true,
			want: injected(pending("ready_for_review", 2, shaDotcom, rules.MoveReady, "Codertocat"), "", func(w *want) { w.base = "master" })},
		{file: "pull_request/ready_for_review.with-installation.payload.json", want: dotcomPR(pending("ready_for_review", 2, shaDotcom, rules.MoveReady, "Codertocat"), "")},
		{file: "pull_request/ready_for_review.with-organization.payload.json", noInst: true,
			want: injected(pending("ready_for_review", 2, shaDotcom, rules.MoveReady, "Codertocat"), "", func(w *want) { w.base = "master" })},
		{file: "pull_request/reopened.payload.json", want: dotcomPR(pending("reopened", 2, shaDotcom, rules.MoveOpen, "Codertocat"), "")},
		{file: "pull_request/reopened.payload.json", opt: &def, comment: "not eligible, not queued: who brought it back is kept a while, for @mergegate queue",
			want: dotcomPR([]leasedo.Event{headEv("reopened", 2, rules.MoveOpen, leasedo.NoConsent, shaDotcom, "Codertocat")}, "")},
		{file: "pull_request/reopened.with-organization.payload.json", want: dotcomPR(pending("reopened", 2, shaDotcom, rules.MoveOpen, "Codertocat"), "")},
		{file: "pull_request/review_request_removed.payload.json", want: dotcomPR(nil, "review_request_removed is not acted on")},
		{file: "pull_request/review_requested.payload.json", want: dotcomPR(nil, "review_requested is not acted on")},
		{file: "pull_request/synchronize.payload.json", want: dotcomPR(pushed(2, shaBefore, shaDotcom, "Codertocat"), "")},
		{file: "pull_request/synchronize.payload.json", opt: &def, comment: "reevaluate and who pushed are sent whatever the triggers: a pull request not queued keeps its heads a while, for @mergegate queue",
			want: dotcomPR(pushed(2, shaBefore, shaDotcom, "Codertocat"), "")},
		{file: "pull_request/unassigned.payload.json", want: dotcomPR(nil, "unassigned is not acted on")},
		{file: "pull_request/unassigned.with-organization.payload.json", want: dotcomPR(nil, "unassigned is not acted on")},
		{file: "pull_request/unlabeled.payload.json", comment: "still carries the trigger label",
			want: dotcomPR(nil, "still eligible after unlabeled")},
		{file: "pull_request/unlabeled.payload.json", opt: &def, comment: "no automerge label: no longer eligible",
			want: dotcomPR(pr("unlabeled", 2, shaDotcom), "")},
		{file: "pull_request/unlabeled.with-organization.payload.json", want: dotcomPR(nil, "still eligible")},
		{file: "pull_request/unlocked.payload.json", want: dotcomPR(nil, "unlocked is not acted on")},
		{file: "pull_request/unlocked.with-organization.payload.json", want: dotcomPR(nil, "unlocked is not acted on")},

		// pull_request on GHES 3.5 (installation 5, PR #2 without labels but labeled's).
		{file: "ghes-35/pull_request/assigned.json", event: "pull_request", want: ghesPR(nil, "assigned is not acted on")},
		{file: "ghes-35/pull_request/closed.json", event: "pull_request", want: ghesPR(pr("closed", 2, shaGHES), "")},
		{file: "ghes-35/pull_request/labeled.json", event: "pull_request", want: ghesPR(consented("labeled", 2, shaGHES), "")},
		{file: "ghes-35/pull_request/opened.json", event: "pull_request", want: ghesPR(nil, `not eligible: no "bug" label`)},
		{file: "ghes-35/pull_request/unassigned.json", event: "pull_request", want: ghesPR(nil, "unassigned is not acted on")},
		{file: "ghes-35/pull_request/unlabeled.json", event: "pull_request", want: ghesPR(pr("unlabeled", 2, shaGHES), "")},

		// pull_request_review.
		// A dismissed approval can take a pull request's reviews below what
		// its base requires: read again, like a submitted one.
		{file: "pull_request_review/dismissed.payload.json",
			want: with(stored("1", helloWorld), func(w *want) { w.events, w.base = gate("pull_request_review", "dismissed", 2, shaDotcom), "master" })},
		{file: "pull_request_review/submitted.payload.json",
			want: with(stored("1", helloWorld), func(w *want) { w.events, w.base = gate("pull_request_review", "submitted", 2, shaDotcom), "master" })},
		{file: "pull_request_review/submitted.with-organization.payload.json",
			want: with(stored("1", helloWorld), func(w *want) { w.events, w.base = gate("pull_request_review", "submitted", 2, shaDotcom), "master" })},
		{file: "ghes-35/pull_request_review/submitted.json", event: "pull_request_review",
			want: with(stored("5", helloWorld), func(w *want) { w.events, w.base = gate("pull_request_review", "submitted", 2, shaGHES), "master" })},

		// check_run: the completed/created examples are repository-hook ones.
		{file: "check_run/completed.payload.json", noInst: true, want: injected(concluded("check_run", "completed", 2, shaDotcom, "Octocoders-linter"), "")},
		{file: "check_run/completed.1.payload.json", noInst: true, want: injected(concluded("check_run", "completed", 2, shaDotcom, "Octocoders-linter"), "")},
		{file: "check_run/completed.with-organization.payload.json", noInst: true, want: injected(concluded("check_run", "completed", 2, shaDotcom, "Octocoders-linter"), "")},
		{file: "check_run/created.payload.json", noInst: true, want: injected(nil, "created is not acted on")},
		{file: "check_run/created.with-organization.payload.json", noInst: true, want: injected(nil, "created is not acted on")},
		{file: "check_run/requested_action.payload.json", want: with(stored("690857", "electron/electron"), func(w *want) { w.ignored = "requested_action is not acted on" })},
		{file: "check_run/rerequested.payload.json", want: with(stored("1", "github/hello-world"), func(w *want) { w.ignored = "rerequested is not acted on" })},
		{file: "check_run/rerequested.with-organization.payload.json", want: with(stored("1", "github/hello-world"), func(w *want) { w.ignored = "rerequested is not acted on" })},
		{file: "ghes-35/check_run/completed.json", event: "check_run", want: with(stored("5", helloWorld), func(w *want) { w.events = concluded("check_run", "completed", 2, shaGHES, "Octocoders-linter") })},
		{file: "ghes-35/check_run/created.json", event: "check_run", want: with(stored("5", helloWorld), func(w *want) { w.ignored = "created is not acted on" })},

		// check_suite: completed.1 has no pull_requests (as for a fork): PR 0.
		{file: "check_suite/completed.payload.json", noInst: true, want: injected(gate("check_suite", "completed", 2, shaDotcom), "")},
		{file: "check_suite/completed.1.payload.json", noInst: true, want: injected(gate("check_suite", "completed", 0, shaDotcom), "")},
		{file: "check_suite/completed.with-organization.payload.json", noInst: true, want: injected(gate("check_suite", "completed", 2, shaDotcom), "")},
		{file: "check_suite/requested.payload.json", want: with(stored("957387", helloWorld), func(w *want) { w.ignored = "requested is not acted on" })},
		{file: "check_suite/requested.payload.with-email-with-special-characters.json", want: with(stored("957387", helloWorld), func(w *want) { w.ignored = "requested is not acted on" })},
		{file: "check_suite/requested.with-organization.payload.json", want: with(stored("957387", helloWorld), func(w *want) { w.ignored = "requested is not acted on" })},
		{file: "check_suite/rerequested.payload.json", want: with(stored("957387", helloWorld), func(w *want) { w.ignored = "rerequested is not acted on" })},
		{file: "check_suite/rerequested.with-organization.payload.json", want: with(stored("957387", helloWorld), func(w *want) { w.ignored = "rerequested is not acted on" })},
		{file: "ghes-35/check_suite/completed.json", event: "check_suite", want: with(stored("5", helloWorld), func(w *want) { w.events = gate("check_suite", "completed", 2, shaGHES) })},
		{file: "ghes-35/check_suite/requested.json", event: "check_suite", want: with(stored("5", helloWorld), func(w *want) { w.ignored = "requested is not acted on" })},
		{file: "ghes-35/check_suite/rerequested.json", event: "check_suite", want: with(stored("5", helloWorld), func(w *want) { w.ignored = "rerequested is not acted on" })},

		// status: no action in the payload; the event's action is the state.
		{file: "status/payload.json", noInst: true, want: injected(concluded("status", "success", 0, shaPush, "default"), "")},
		{file: "status/with-author-committer-null.payload.json", noInst: true, want: injected(concluded("status", "success", 0, shaPush, "default"), "")},
		{file: "status/with-installation.payload.json", want: with(stored("1", helloWorld), func(w *want) { w.events = concluded("status", "success", 0, shaPush, "default") })},
		{file: "ghes-35/status/payload.json", event: "status", want: with(stored("5", helloWorld), func(w *want) { w.events = concluded("status", "success", 0, shaGHESSt, "default") })},

		// installation and installation_repositories: no repository.
		{file: "installation/created.payload.json", want: with(stored("957387", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "957387", Action: "created", Added: []string{helloWorld}}
		})},
		{file: "installation/created.with-requester.payload.json", want: with(stored("957387", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "957387", Action: "created", Added: []string{helloWorld}}
		})},
		{file: "installation/deleted.payload.json", want: with(stored("2", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "2", Action: "deleted", Removed: []string{"octocat/Hello-World"}}
		})},
		{file: "installation/new_permissions_accepted.payload.json", want: with(stored("957387", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "957387", Action: "new_permissions_accepted"}
		})},
		{file: "installation/suspend.payload.json", want: with(stored("16598467", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "16598467", Action: "suspend"}
		})},
		{file: "installation/unsuspend.payload.json", want: with(stored("16598467", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "16598467", Action: "unsuspend"}
		})},
		{file: "installation_repositories/added.payload.json", want: with(stored("957387", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "957387", Action: "added", Added: []string{"Codertocat/Space"}}
		})},
		{file: "installation_repositories/removed.payload.json", want: with(stored("2", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "2", Action: "removed", Removed: []string{"octocat/Hello-World"}}
		})},
		{file: "ghes-35/installation/created.json", event: "installation", want: with(stored("5", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "5", Action: "created", Added: []string{helloWorld}}
		})},
		{file: "ghes-35/installation/deleted.json", event: "installation", want: with(stored("5", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "5", Action: "deleted"}
		})},
		{file: "ghes-35/installation_repositories/added.json", event: "installation_repositories", want: with(stored("5", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "5", Action: "added", Added: []string{"Codertocat/Space"}}
		})},
		{file: "ghes-35/installation_repositories/removed.json", event: "installation_repositories", want: with(stored("5", ""), func(w *want) {
			w.install = &InstallChange{Tenant: "5", Action: "removed", Removed: []string{"Codertocat/Space"}}
		})},

		// issue_comment: GitHub's example is a comment on an issue, not a
		// pull request (no issue.pull_request); TestTranslateIssueComment
		// builds the pull request's comment on it.
		{file: "issue_comment/created.with-installation.payload.json",
			want: with(stored("1", helloWorld), func(w *want) { w.ignored = "a comment on an issue, not a pull request" })},

		// ping: 200, never stored (an App's ping has no installation).
		{file: "ping/payload.json", want: ping},
		{file: "ping/with-app_id.payload.json", want: ping},
		{file: "ping/with-organization.payload.json", want: ping},
		{file: "ghes-35/ping/payload.json", event: "ping", want: ping},

		// push: tags are ignored, branch pushes update the queue's base.
		{file: "push/payload.json", noInst: true, want: injected(nil, "not a branch push")},
		{file: "push/1.payload.json", noInst: true, want: injected(nil, "not a branch push")},
		{file: "push/with-organization.payload.json", noInst: true, want: injected(nil, "not a branch push")},
		{file: "push/with-installation.payload.json", want: with(stored("1", helloWorld), func(w *want) { w.ignored = "refs/tags/simple-tag is not a branch push" })},
		{file: "push/with-new-branch.payload.json", want: with(stored("1", helloWorld), func(w *want) {
			w.push = &Push{Repo: helloWorld, Ref: "master", After: shaPush}
		})},
		{file: "push/with-no-username-committer.payload.json", want: with(stored("1", helloWorld), func(w *want) {
			w.push = &Push{Repo: helloWorld, Ref: "master", After: shaPush}
		})},
		{file: "ghes-35/push/payload.json", event: "push", want: with(stored("5", helloWorld), func(w *want) { w.ignored = "not a branch push" })},

		// GitHub's merge queue made a group for PR #104 (its head ref,
		// gh-readonly-queue/main/pr-104-<sha>, names it): its entry is read again.
		{file: "merge_group/checks_requested.payload.json", want: with(stored("1", "octo-org/octo-repo"), func(w *want) {
			w.events, w.base = []leasedo.Event{ev("merge_group", "checks_requested", 104, "")}, "main"
		})},
	}
}

// eventOf is the X-GitHub-Event of an example: its directory.
func (c fixtureCase) eventOf() string {
	if c.event != "" {
		return c.event
	}
	return strings.SplitN(c.file, "/", 2)[0]
}

func TestFixturesThroughHandler(t *testing.T) {
	for i, c := range fixtureCases() {
		name := c.file
		if c.opt != nil {
			name += "/" + c.opt.TriggerLabel
		}
		t.Run(name, func(t *testing.T) {
			body := readFixture(t, c.file)
			opt := bugTrigger
			if c.opt != nil {
				opt = *c.opt
			}
			id := fmt.Sprintf("fixture-%03d", i)
			if c.noInst {
				th := newTestHandler(t)
				w := th.serve(delivery{event: c.eventOf(), id: id, body: body})
				if w.Code != http.StatusBadRequest {
					t.Fatalf("repository-hook example: status %d, want 400 (%s)", w.Code, w.Body)
				}
				if msg := errorOf(t, w); !strings.Contains(msg, "repository webhook") || !strings.Contains(msg, "GitHub App") {
					t.Errorf("400 message %q does not explain the repository hook", msg)
				}
				if th.inbox.len() != 0 {
					t.Fatal("a refused delivery was stored")
				}
				body = editJSON(t, body, func(m map[string]any) {
					m["installation"] = map[string]any{"id": json.Number(injectedTenant), "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uNDI0Mg=="}
				})
			}
			checkDelivery(t, c.eventOf(), id, body, opt, c.want)
		})
	}
}

// checkDelivery signs body, sends it through the real handler and checks the
// answer, the stored delivery and its translation.
func checkDelivery(t *testing.T, event, id string, body []byte, opt rules.Options, w want) {
	t.Helper()
	th := newTestHandler(t)
	resp := th.serve(delivery{event: event, id: id, body: body})
	if resp.Code != w.status {
		t.Fatalf("status %d, want %d (%s)", resp.Code, w.status, resp.Body)
	}
	if w.status != http.StatusAccepted {
		if n := th.inbox.len(); n != 0 {
			t.Fatalf("status %d stored %d deliveries", w.status, n)
		}
		return
	}
	d, ok := th.inbox.get(id)
	if !ok {
		t.Fatal("202 but nothing stored")
	}
	meta, err := Parse(event, body)
	if err != nil {
		t.Fatal(err)
	}
	wantD := leasedo.Delivery{Seq: 1, ID: id, Event: event, Action: meta.Action, Tenant: w.tenant, Repo: w.repo,
		Body: body, ReceivedAt: testNow, State: leasedo.DeliveryPending}
	if !reflect.DeepEqual(d, wantD) {
		d.Body, wantD.Body = nil, nil // keep the failure readable
		t.Fatalf("stored %+v\nwant   %+v", d, wantD)
	}
	if th.onStoredCalls() != 1 {
		t.Errorf("OnStored called %d times, want 1", th.onStoredCalls())
	}
	got, err := Translate(d, opt)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	checkTranslation(t, got, w)
}

// checkTranslation compares got with w: events exactly (but Reason), the
// ignored reason as a substring.
func checkTranslation(t *testing.T, got Translation, w want) {
	t.Helper()
	for i := range got.Events {
		e := &got.Events[i]
		if e.Details == nil {
			t.Fatalf("event %d has no details", i)
		}
		if e.Details.GateResult != "" {
			t.Errorf("event %d trusts a gate result from the payload: %q", i, e.Details.GateResult)
		}
		if err := e.Validate(); err != nil {
			t.Errorf("event %d is not a valid /event body: %v", i, err)
		}
		d := *e.Details
		if e.EventType == "pull_request" && d.Base != w.base {
			t.Errorf("event %d: details.base = %q, want %q", i, d.Base, w.base)
		}
		d.Reason, d.Base, d.MergeMethod = "", "", "" // MergeMethod: TestAutoMergeMethodIsCarried
		e.Details = &d
	}
	var wantEvents []leasedo.Event
	for _, e := range w.events {
		e.Tenant, e.Repo = w.tenant, w.repo
		if e.Op == "" {
			e.Op = OpOf(e.EventType, e.Action)
		}
		wantEvents = append(wantEvents, e)
	}
	if !reflect.DeepEqual(got.Events, wantEvents) {
		t.Errorf("events:\n got %s\nwant %s", mustJSON(got.Events), mustJSON(wantEvents))
	}
	switch {
	case w.ignored == "" && got.Ignored != "":
		t.Errorf("ignored %q, want acted on", got.Ignored)
	case w.ignored != "" && !strings.Contains(got.Ignored, w.ignored):
		t.Errorf("ignored %q, want it to contain %q", got.Ignored, w.ignored)
	}
	if w.ignored != "" && len(got.Events) > 0 {
		t.Error("ignored and events both set")
	}
	if !reflect.DeepEqual(got.Install, w.install) {
		t.Errorf("install %+v, want %+v", got.Install, w.install)
	}
	if !reflect.DeepEqual(got.Push, w.push) {
		t.Errorf("push %+v, want %+v", got.Push, w.push)
	}
	if got.Base != w.base {
		t.Errorf("base %q, want %q", got.Base, w.base)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestFixtureTableCoversEveryExample keeps the table honest as examples are
// added to testdata.
func TestFixtureTableCoversEveryExample(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range fixtureCases() {
		covered[c.file] = true
	}
	err := filepath.WalkDir(fixtureDir, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		rel, _ := filepath.Rel(fixtureDir, path)
		if !covered[filepath.ToSlash(rel)] {
			t.Errorf("example %s is not in the fixture table", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Stat(os.DirFS(fixtureDir), "LICENSE"); err != nil {
		t.Errorf("the examples' LICENSE must stay beside them: %v", err)
	}
}

// TestFixturesCompact sends a compact form of one example, as GitHub does.
func TestFixturesCompact(t *testing.T) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, readFixture(t, "pull_request/opened.payload.json")); err != nil {
		t.Fatal(err)
	}
	checkDelivery(t, "pull_request", "compact-1", buf.Bytes(), bugTrigger,
		want{status: http.StatusAccepted, tenant: "1", repo: helloWorld, base: "master",
			events: []leasedo.Event{ev("pull_request", "opened", 2, shaDotcom)}})
}
