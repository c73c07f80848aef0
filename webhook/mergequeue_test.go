package webhook

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// GitHub's merge queue's deliveries, built from GitHub's examples (the
// pull_request ones have no enqueued or dequeued example: labeled's pull
// request with GitHub's action and reason; merge_group destroyed from
// checks_requested's group): each makes the pull request's entry be read
// again, and nothing in them is trusted; what happened is read from GitHub.
func TestMergeQueueDeliveries(t *testing.T) {
	const group = "refs/heads/gh-readonly-queue/release/1.x/pr-104-929f8209d40f77f4abc622a499c93a83babdbe64"
	cases := []struct {
		name, event, from string
		edit              func(t *testing.T, m map[string]any)
		w                 want
		op                leasedo.Op
		reason            string
	}{
		{
			name: "pull_request enqueued", event: "pull_request", from: "pull_request/labeled.payload.json",
			edit: func(t *testing.T, m map[string]any) { m["action"] = "enqueued"; delete(m, "label") },
			w: want{tenant: "1", repo: helloWorld, base: "master",
				events: []leasedo.Event{ev("pull_request", "enqueued", 2, shaDotcom)}},
			op: leasedo.OpRecheck, reason: "added to GitHub's merge queue",
		},
		{
			name: "pull_request dequeued for a failed group", event: "pull_request", from: "pull_request/labeled.payload.json",
			edit: func(t *testing.T, m map[string]any) {
				m["action"], m["reason"] = "dequeued", "CI_FAILURE"
				delete(m, "label")
			},
			w: want{tenant: "1", repo: helloWorld, base: "master",
				events: []leasedo.Event{ev("pull_request", "dequeued", 2, shaDotcom)}},
			op: leasedo.OpRecheck, reason: `removed from GitHub's merge queue: CI_FAILURE`,
		},
		{
			name: "pull_request dequeued without an eligible label is still read", event: "pull_request", from: "pull_request/labeled.payload.json",
			edit: func(t *testing.T, m map[string]any) {
				m["action"], m["reason"] = "dequeued", "MANUAL"
				obj(t, m, "pull_request")["labels"] = []any{}
			},
			w: want{tenant: "1", repo: helloWorld, base: "master",
				events: []leasedo.Event{ev("pull_request", "dequeued", 2, shaDotcom)}},
			op: leasedo.OpRecheck, reason: `removed from GitHub's merge queue: MANUAL`,
		},
		{
			name: "merge_group destroyed, a base with a slash", event: "merge_group", from: "merge_group/checks_requested.payload.json",
			edit: func(t *testing.T, m map[string]any) {
				m["action"], m["reason"] = "destroyed", "dequeued"
				g := obj(t, m, "merge_group")
				g["head_ref"], g["base_ref"] = group, "refs/heads/release/1.x"
			},
			w:  want{tenant: "1", repo: "octo-org/octo-repo", base: "release/1.x", events: []leasedo.Event{ev("merge_group", "destroyed", 104, "")}},
			op: leasedo.OpLabels, reason: `merge group destroyed: dequeued`,
		},
		{
			name: "merge_group with a ref that names no pull request", event: "merge_group", from: "merge_group/checks_requested.payload.json",
			edit: func(t *testing.T, m map[string]any) { obj(t, m, "merge_group")["head_ref"] = "refs/heads/main" },
			w:    want{tenant: "1", repo: "octo-org/octo-repo", ignored: "names no pull request"},
		},
		{
			name: "merge_group with an action GitHub may add later", event: "merge_group", from: "merge_group/checks_requested.payload.json",
			edit: func(t *testing.T, m map[string]any) { m["action"] = "prioritized" },
			w:    want{tenant: "1", repo: "octo-org/octo-repo", ignored: "merge_group action prioritized is not acted on"},
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := editJSON(t, readFixture(t, c.from), func(m map[string]any) { c.edit(t, m) })
			c.w.status = http.StatusAccepted
			checkDelivery(t, c.event, fmt.Sprintf("mq-%d", i), body, rules.DefaultOptions(), c.w)
			tr, err := Translate(leasedo.Delivery{Event: c.event, Tenant: c.w.tenant, Repo: c.w.repo, Body: body}, rules.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if c.op == "" {
				return
			}
			if len(tr.Events) != 1 || tr.Events[0].Op != c.op || tr.Events[0].Details.Reason != c.reason {
				t.Fatalf("events %s, want one %s with reason %q", mustJSON(tr.Events), c.op, c.reason)
			}
			if c.w.base != "" && tr.Base != c.w.base {
				t.Errorf("base %q, want %q", tr.Base, c.w.base)
			}
		})
	}
}
