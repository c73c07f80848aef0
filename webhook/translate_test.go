package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// autoMergeObject is what GitHub puts in pull_request.auto_merge once enabled.
func autoMergeObject() map[string]any {
	return map[string]any{
		"enabled_by":     map[string]any{"login": "Codertocat", "id": 21031067, "type": "User"},
		"merge_method":   "squash",
		"commit_title":   "Update the README with new information. (#2)",
		"commit_message": "",
	}
}

// TestSyntheticPullRequestActions covers the actions GitHub has no example
// for (edited, auto_merge_enabled, auto_merge_disabled) and the eligibility
// rules, each built from a neighbour example (same PR object) plus the field
// the action changes, and sent through the real handler.
func TestSyntheticPullRequestActions(t *testing.T) {
	const newHead = "0123456789abcdef0123456789abcdef01234567"
	def := rules.DefaultOptions()
	labelOff := rules.Options{TriggerLabel: "", AutoMergeTrigger: true}
	autoOff := rules.Options{TriggerLabel: rules.DefaultTriggerLabel, AutoMergeTrigger: false}
	bothOff := rules.Options{}
	join := func(action, sha string) []leasedo.Event { return []leasedo.Event{ev("pull_request", action, 2, sha)} }
	consented := func(action, sha string) []leasedo.Event {
		e := join(action, sha)
		e[0].Details.Consent = leasedo.ConsentGiven
		return e
	}
	// A new head or base, and the check of who moved it.
	moved := func(action, kind, before, after string) []leasedo.Event {
		return append(join(action, after), headEv(action, 2, kind, before, after, "Codertocat"))
	}

	cases := []struct {
		name    string
		from    string
		opt     rules.Options
		edit    func(t *testing.T, m map[string]any)
		events  []leasedo.Event
		ignored string
	}{
		{
			name: "edited base changed", from: "pull_request/opened.payload.json", opt: bugTrigger,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "edited"
				m["changes"] = map[string]any{"base": map[string]any{
					"ref": map[string]any{"from": "develop"},
					"sha": map[string]any{"from": "b5a6c1f2b7c6a5d4c3b2a1f0e9d8c7b6a5f4e3d2"},
				}}
			},
			events: moved("edited", rules.MoveBase, shaDotcom, shaDotcom),
		},
		{
			name: "edited title only", from: "pull_request/opened.payload.json", opt: bugTrigger,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "edited"
				m["changes"] = map[string]any{"title": map[string]any{"from": "Update the README"}}
			},
			ignored: "edited without a base change",
		},
		{
			name: "auto_merge_enabled", from: "pull_request/opened.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "auto_merge_enabled"
				obj(t, m, "pull_request")["auto_merge"] = autoMergeObject()
			},
			events: consented("auto_merge_enabled", shaDotcom),
		},
		{
			name: "auto_merge_enabled with the auto-merge trigger off", from: "pull_request/opened.payload.json", opt: autoOff,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "auto_merge_enabled"
				obj(t, m, "pull_request")["auto_merge"] = autoMergeObject()
			},
			ignored: `not eligible: no "automerge" label`,
		},
		{
			name: "auto_merge_enabled on a draft", from: "pull_request/converted_to_draft.with-installation.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "auto_merge_enabled"
				obj(t, m, "pull_request")["auto_merge"] = autoMergeObject()
			},
			ignored: "not eligible: pull request is a draft",
		},
		{
			name: "auto_merge_disabled, no label", from: "pull_request/opened.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "auto_merge_disabled"
				m["reason"] = "Pull request was closed"
			},
			events: join("auto_merge_disabled", shaDotcom),
		},
		{
			name: "auto_merge_disabled, still labelled", from: "pull_request/opened.payload.json", opt: bugTrigger,
			edit: func(t *testing.T, m map[string]any) {
				m["action"] = "auto_merge_disabled"
			},
			ignored: "still eligible after auto_merge_disabled",
		},
		{
			name: "labeled automerge", from: "pull_request/labeled.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				m["label"] = map[string]any{"id": 1, "name": "automerge", "color": "0e8a16", "default": false}
				pr := obj(t, m, "pull_request")
				pr["labels"] = append(pr["labels"].([]any), map[string]any{"id": 1, "name": "AutoMerge"})
			},
			events: consented("labeled", shaDotcom),
		},
		{
			name: "labeled automerge with the label trigger off", from: "pull_request/labeled.payload.json", opt: labelOff,
			edit: func(t *testing.T, m map[string]any) {
				m["label"] = map[string]any{"name": "automerge"}
				pr := obj(t, m, "pull_request")
				pr["labels"] = []any{map[string]any{"name": "automerge"}}
			},
			ignored: "not eligible: auto-merge is not enabled",
		},
		{
			name: "unlabeled another label, still carries automerge", from: "pull_request/unlabeled.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				obj(t, m, "pull_request")["labels"] = []any{map[string]any{"name": "automerge"}}
			},
			ignored: "still eligible after unlabeled",
		},
		{
			name: "unlabeled automerge but auto-merge still on", from: "pull_request/unlabeled.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				m["label"] = map[string]any{"name": "automerge"}
				pr := obj(t, m, "pull_request")
				pr["labels"] = []any{}
				pr["auto_merge"] = autoMergeObject()
			},
			ignored: "still eligible",
		},
		{
			name: "opened with both triggers off", from: "pull_request/opened.payload.json", opt: bothOff,
			edit:    func(t *testing.T, m map[string]any) {},
			ignored: "both triggers",
		},
		{
			name: "opened as a draft", from: "pull_request/opened.payload.json", opt: bugTrigger,
			edit:    func(t *testing.T, m map[string]any) { obj(t, m, "pull_request")["draft"] = true },
			ignored: "not eligible: pull request is a draft",
		},
		{
			name: "reopened but closed state", from: "pull_request/reopened.payload.json", opt: bugTrigger,
			edit:    func(t *testing.T, m map[string]any) { obj(t, m, "pull_request")["state"] = "closed" },
			ignored: "not eligible: pull request is closed",
		},
		{
			name: "synchronize to a new head", from: "pull_request/synchronize.payload.json", opt: bugTrigger,
			edit: func(t *testing.T, m map[string]any) {
				m["before"], m["after"] = shaDotcom, newHead
				obj(t, obj(t, m, "pull_request"), "head")["sha"] = newHead
			},
			events: moved("synchronize", rules.MovePush, shaDotcom, newHead),
		},
		{
			name: "converted_to_draft while labelled", from: "pull_request/converted_to_draft.with-installation.payload.json", opt: bugTrigger,
			edit:   func(t *testing.T, m map[string]any) {},
			events: join("converted_to_draft", shaDotcom),
		},
		{
			name: "closed while eligible", from: "pull_request/closed.payload.json", opt: def,
			edit: func(t *testing.T, m map[string]any) {
				obj(t, m, "pull_request")["auto_merge"] = autoMergeObject()
			},
			events: join("closed", shaDotcom),
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := editJSON(t, readFixture(t, c.from), func(m map[string]any) { c.edit(t, m) })
			checkDelivery(t, "pull_request", fmt.Sprintf("synthetic-%d", i), body, c.opt, want{
				status: http.StatusAccepted, tenant: "1", repo: helloWorld, base: "master",
				events: c.events, ignored: c.ignored,
			})
		})
	}
}

// TestSyntheticGateAndPush covers gate events and pushes the examples lack.
func TestSyntheticGateAndPush(t *testing.T) {
	inst := func(m map[string]any) { m["installation"] = map[string]any{"id": 99} }
	cases := []struct {
		name, event, from string
		edit              func(m map[string]any)
		w                 want
	}{
		{
			name: "pending status is still sent", event: "status", from: "status/with-installation.payload.json",
			edit: func(m map[string]any) { m["state"] = "pending" },
			w:    want{tenant: "1", repo: helloWorld, events: []leasedo.Event{ev("status", "pending", 0, shaPush)}},
		},
		{
			name: "check_run completed from a fork (no pull_requests)", event: "check_run", from: "check_run/completed.payload.json",
			edit: func(m map[string]any) {
				inst(m)
				m["check_run"].(map[string]any)["pull_requests"] = []any{}
			},
			w: want{tenant: "99", repo: helloWorld, events: []leasedo.Event{concludedEv("check_run", "completed", 0, shaDotcom, "Octocoders-linter")}},
		},
		{
			name: "an approving review says so", event: "pull_request_review", from: "pull_request_review/submitted.payload.json",
			edit: func(m map[string]any) { m["review"].(map[string]any)["state"] = "approved" },
			w: want{tenant: "1", repo: helloWorld, base: "master", events: []leasedo.Event{func() leasedo.Event {
				e := ev("pull_request_review", "submitted", 2, shaDotcom)
				e.Details.Approved = true
				return e
			}()}},
		},
		{
			name: "branch deleted", event: "push", from: "push/with-new-branch.payload.json",
			edit: func(m map[string]any) {
				m["deleted"], m["after"] = true, "0000000000000000000000000000000000000000"
			},
			w: want{tenant: "1", repo: helloWorld, ignored: "branch master was deleted"},
		},
		{
			name: "installation_repositories with an unknown action", event: "installation_repositories", from: "installation_repositories/added.payload.json",
			edit: func(m map[string]any) { m["action"] = "renamed" },
			w:    want{tenant: "957387", ignored: "renamed is not acted on"},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := editJSON(t, readFixture(t, c.from), c.edit)
			c.w.status = http.StatusAccepted
			checkDelivery(t, c.event, fmt.Sprintf("gate-%d", i), body, rules.DefaultOptions(), c.w)
		})
	}
}

// concludedEv is ev for a check run's or a status's delivery, which names
// the check it says concluded.
func concludedEv(eventType, action string, pr int, sha, check string) leasedo.Event {
	e := ev(eventType, action, pr, sha)
	e.Details.Check = check
	return e
}

func TestTranslateMalformed(t *testing.T) {
	cases := []struct {
		name string
		d    leasedo.Delivery
	}{
		{"not JSON", leasedo.Delivery{Event: "pull_request", Repo: "o/r", Body: []byte("{")}},
		{"not an object", leasedo.Delivery{Event: "push", Repo: "o/r", Body: []byte(`["refs/heads/main"]`)}},
		{"no pull_request", leasedo.Delivery{Event: "pull_request", Repo: "o/r", Body: []byte(`{"action":"opened"}`)}},
		{"wrong type", leasedo.Delivery{Event: "pull_request", Repo: "o/r", Body: []byte(`{"action":"opened","pull_request":{"number":"2"}}`)}},
		{"no repo", leasedo.Delivery{Event: "pull_request", Body: []byte(`{"action":"closed","pull_request":{"number":2,"state":"closed"}}`)}},
		{"check without sha", leasedo.Delivery{Event: "check_suite", Repo: "o/r", Body: []byte(`{"action":"completed","check_suite":{}}`)}},
		{"status without sha", leasedo.Delivery{Event: "status", Repo: "o/r", Body: []byte(`{"state":"success"}`)}},
		{"installation without id", leasedo.Delivery{Event: "installation", Body: []byte(`{"action":"created"}`)}},
		{"unknown event, not JSON", leasedo.Delivery{Event: "gollum", Body: []byte("nope")}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := Translate(c.d, rules.DefaultOptions())
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Translate = %+v, %v; want an ErrMalformed", tr, err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		file, event string
		want        Meta
	}{
		{"pull_request/synchronize.payload.json", "pull_request", Meta{Action: "synchronize", Tenant: "1", Repo: helloWorld, PRNumber: 2, Sha: shaDotcom}},
		{"pull_request_review/submitted.payload.json", "pull_request_review", Meta{Action: "submitted", Tenant: "1", Repo: helloWorld, PRNumber: 2, Sha: shaDotcom}},
		{"ghes-35/check_suite/completed.json", "check_suite", Meta{Action: "completed", Tenant: "5", Repo: helloWorld, PRNumber: 2, Sha: shaGHES}},
		{"check_run/requested_action.payload.json", "check_run", Meta{Action: "requested_action", Tenant: "690857", Repo: "electron/electron", PRNumber: 26764, Sha: "5bd5f196a46b8222fb7484f05faba41a73cf34bd"}},
		{"status/with-installation.payload.json", "status", Meta{Tenant: "1", Repo: helloWorld, Sha: shaPush}},
		{"push/with-new-branch.payload.json", "push", Meta{Tenant: "1", Repo: helloWorld, Sha: shaPush}},
		{"installation/suspend.payload.json", "installation", Meta{Action: "suspend", Tenant: "16598467"}},
		{"ping/payload.json", "ping", Meta{Repo: "Octocoders/Hello-World"}},
	}
	for _, c := range cases {
		got, err := Parse(c.event, readFixture(t, c.file))
		if err != nil || got != c.want {
			t.Errorf("Parse(%s) = %+v, %v; want %+v", c.file, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "null", "[]", `"x"`, "{", `{"installation":{"id":"1"}}`} {
		if _, err := Parse("pull_request", []byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%q) err = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestIgnoredNamesTheEventType(t *testing.T) {
	tr, err := Translate(leasedo.Delivery{Event: "issues", Tenant: "1", Repo: "o/r", Body: []byte(`{"action":"opened"}`)}, rules.DefaultOptions())
	if err != nil || tr.Ignored != "event type issues is not acted on" || len(tr.Events) != 0 {
		t.Fatalf("Translate = %+v, %v", tr, err)
	}
	if !strings.Contains(fmt.Sprint(rules.DefaultOptions()), rules.DefaultTriggerLabel) {
		t.Fatal("DefaultOptions has no trigger label")
	}
}

// The method an author chose when enabling auto-merge travels with the
// join, so that the merge uses it.
func TestAutoMergeMethodIsCarried(t *testing.T) {
	body := editJSON(t, readFixture(t, "pull_request/opened.payload.json"), func(m map[string]any) {
		m["action"] = "auto_merge_enabled"
		obj(t, m, "pull_request")["auto_merge"] = autoMergeObject()
	})
	tr, err := Translate(leasedo.Delivery{Event: "pull_request", Tenant: "1", Repo: "Codertocat/Hello-World", Body: body}, rules.DefaultOptions())
	if err != nil || len(tr.Events) != 1 || tr.Events[0].Op != leasedo.OpJoin || tr.Events[0].Details.MergeMethod != "squash" {
		t.Fatalf("Translate = %+v %v, want a join carrying merge method squash", tr.Events, err)
	}
}

// POST /event's vocabulary, which is GitHub's, and the queue operation
// each asks for (docs/lease-protocol.md).
func TestSeedVocabulary(t *testing.T) {
	for _, c := range []struct {
		eventType, action string
		want              leasedo.Op
	}{
		{"pull_request", "opened", leasedo.OpJoin},
		{"pull_request", "reopened", leasedo.OpJoin},
		{"pull_request", "ready_for_review", leasedo.OpJoin},
		{"pull_request", "labeled", leasedo.OpJoin},
		{"pull_request", "auto_merge_enabled", leasedo.OpJoin},
		{"pull_request", "closed", leasedo.OpLeave},
		{"pull_request", "unlabeled", leasedo.OpLeave},
		{"pull_request", "auto_merge_disabled", leasedo.OpLeave},
		{"pull_request", "converted_to_draft", leasedo.OpLeave},
		{"pull_request", "synchronize", leasedo.OpReevaluate},
		{"pull_request", "edited", leasedo.OpReevaluate},
		{"pull_request", "enqueued", leasedo.OpRecheck},
		{"pull_request", "dequeued", leasedo.OpRecheck},
		{"merge_group", "checks_requested", leasedo.OpLabels},
		{"merge_group", "destroyed", leasedo.OpLabels},
		{"pull_request", "assigned", leasedo.OpIgnore},
		{"check_suite", "completed", leasedo.OpRecheck},
		{"check_run", "completed", leasedo.OpRecheck},
		{"status", "", leasedo.OpRecheck},
		{"status", "success", leasedo.OpRecheck},
		{"pull_request_review", "submitted", leasedo.OpRecheck},
		{"push", "", leasedo.OpIgnore},
		{"issues", "opened", leasedo.OpIgnore},
	} {
		if got := OpOf(c.eventType, c.action); got != c.want {
			t.Errorf("OpOf(%s, %q) = %s, want %s", c.eventType, c.action, got, c.want)
		}
	}
}

// A push to a merge train's branch is mergegate's own doing: ignored,
// saying so, whatever the branch's base (a policy file in it included).
func TestPushToOwnBranchIgnored(t *testing.T) {
	for i, branch := range []string{"mergegate/master/7", "mergegate/release/1.x/12"} {
		body := editJSON(t, readFixture(t, "push/with-new-branch.payload.json"), func(m map[string]any) {
			m["ref"] = "refs/heads/" + branch
		})
		checkDelivery(t, "push", fmt.Sprintf("own-%d", i), body, rules.DefaultOptions(),
			want{status: http.StatusAccepted, tenant: "1", repo: helloWorld, ignored: "push to mergegate's own branch " + branch})
	}
	// A branch that only looks like one is not.
	body := editJSON(t, readFixture(t, "push/with-new-branch.payload.json"), func(m map[string]any) {
		m["ref"] = "refs/heads/mergegate-docs"
	})
	tr, err := Translate(leasedo.Delivery{Event: "push", Tenant: "1", Repo: helloWorld, Body: body}, rules.DefaultOptions())
	if err != nil || tr.Ignored != "" || tr.Push == nil || tr.Push.Ref != "mergegate-docs" {
		t.Errorf("push to mergegate-docs: %+v %v", tr, err)
	}
}
