package app

// End-to-end tests of consent: who may queue a pull request, and for
// which head (signed deliveries, the fake GitHub).

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge/fakegithub"
	"github.com/mergegate/mergegate/policy"
)

// commentCommand: user comments body on PR n (on the fake GitHub too), and
// GitHub delivers the issue_comment.
func (h *harness) commentCommand(n int, user, body string) {
	h.t.Helper()
	id := h.gh.AddComment(testRepo, n, user, body)
	h.mustSend("issue_comment", h.fixture("issue_comment/created.with-installation.payload.json", func(m map[string]any) {
		obj(m, "repository")["full_name"] = testRepo
		is := obj(m, "issue")
		is["number"] = n
		is["pull_request"] = map[string]any{"url": "https://api.github.com/repos/" + testRepo + "/pulls/" + strconv.Itoa(n)}
		c := obj(m, "comment")
		c["id"] = id
		c["body"] = body
		c["user"] = map[string]any{"login": user, "type": "User"}
		m["sender"] = map[string]any{"login": user, "type": "User"}
	}))
}

// withSender sets a delivery's sender (a User, or a Bot for a login
// ending in [bot]).
func withSender(t testing.TB, body []byte, login string) []byte {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	m["sender"] = map[string]any{"login": login, "type": typ, "id": 1}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// With label_requires_write, a writer's `@mergegate queue`: mergegate adds
// the trigger label itself, and the labeled delivery that follows is sent
// by mergegate's own bot. The label carries the command's consent (the
// bot's permission, "read" here, is not what counts): the pull request
// stays queued and merges, and nobody is told anything.
func TestQueueCommandUnderLabelRequiresWrite(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "label_requires_write: true\n")
	h.pushPolicy()
	h.settle()
	h.gh.SetRole(testRepo, "alice", "write")
	pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, BaseRef: testBase, Author: "octocat"})

	h.commentCommand(1, "alice", "@mergegate queue")
	h.settle()
	if got, _ := h.gh.PR(testRepo, 1); !slices.Contains(got.Labels, "automerge") {
		t.Fatalf("labels after @mergegate queue = %v, want the trigger label", got.Labels)
	}
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, pr.HeadSHA, "automerge"), fakegithub.AppBotLogin))
	h.settle()
	if q := h.liveQueue(); len(q) != 1 || q[0].PRNumber != 1 {
		t.Fatalf("queue after the bot's labeled delivery = %+v, want #1 queued", q)
	}
	h.pass(pr.HeadSHA)
	h.eventually("#1 merged", func() bool { return len(h.merges()) == 1 })
	if got, _ := h.gh.PR(testRepo, 1); !slices.Contains(got.Labels, "automerge") && !got.Merged {
		t.Errorf("the trigger label was removed: %v", got.Labels)
	}
	for _, c := range h.gh.Comments() {
		if c.PRNumber == 1 && c.User == "" {
			t.Errorf("mergegate commented %q", c.Body)
		}
	}
	if n := h.gh.CallCount(fakegithub.RouteGetApp); n != 1 {
		t.Errorf("%d reads of the App's login, want 1", n)
	}
}

// Another bot's label (a workflow's github-actions[bot], which anyone who
// can open a pull request may set off) is checked like anyone's.
func TestOtherBotsLabelUnderLabelRequiresWrite(t *testing.T) {
	h := newHarness(t)
	h.gh.SetFile(testRepo, policy.Path, "label_requires_write: true\n")
	h.pushPolicy()
	h.settle()
	pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, BaseRef: testBase, Author: "octocat", Labels: []string{"automerge"}})
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, pr.HeadSHA, "automerge"), "github-actions[bot]"))
	h.settle()
	if q := h.liveQueue(); len(q) != 0 {
		t.Fatalf("queue after github-actions[bot]'s label = %+v, want empty", q)
	}
	if got, _ := h.gh.PR(testRepo, 1); slices.Contains(got.Labels, "automerge") {
		t.Errorf("labels = %v, want the trigger label removed", got.Labels)
	}
}
