package app

// End-to-end tests of consent: who may queue a pull request, and for
// which head (signed deliveries, the fake GitHub).

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

// commentCommand: user comments body on PR n (on the fake GitHub too), and
// GitHub delivers the issue_comment at once.
func (h *harness) commentCommand(n int, user, body string) {
	h.t.Helper()
	h.commentCommandAt(n, user, body, h.clock.Now())
}

// commentCommandAt is commentCommand for a comment written at at (its
// delivery late, when at is in the past).
func (h *harness) commentCommandAt(n int, user, body string, at time.Time) {
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
		c["created_at"] = at.UTC().Format(time.RFC3339)
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

// pushBy: user pushes sha onto PR n's branch, and GitHub delivers the
// synchronize (before: the head it replaced; sender: user).
func (h *harness) pushBy(n int, sha, user string) {
	h.t.Helper()
	h.gh.SetHead(testRepo, n, sha)
	h.mustSend("pull_request", withSender(h.t, h.prPayload("synchronize", n, sha, "automerge"), user))
}

// A serial base with no required review: a writer labels a fork's pull
// request; its author, who may not write, pushes new commits. The new
// head passes its checks but is never merged: it keeps its place, its
// check run says who pushed and what a writer must do, and the pull
// requests behind it merge. A writer's `@mergegate queue` lets it merge,
// at that head.
func TestPushByANonWriterNeedsAWritersConsent(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRole(testRepo, "alice", "write")
	shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}, Author: "eve", Fork: true, LabeledBy: "alice"})
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, shaA, "automerge"), "alice"))
	h.settle()
	h.pushBy(1, shaB, "eve")
	h.pass(shaB)
	h.label(2, strings.Repeat("c", 40))
	h.pass(strings.Repeat("c", 40))
	h.eventually("#2 merged", func() bool { return len(h.merges()) == 1 })
	h.settle()
	if m := h.merges(); m[0].PRNumber != 2 {
		t.Fatalf("merges = %+v, want #2 only", m)
	}
	q := h.liveQueue()
	if len(q) != 1 || q[0].PRNumber != 1 || q[0].Status != leasedo.StatusBlocked {
		t.Fatalf("queue = %+v, want #1 held", q)
	}
	title := h.lastTitle(shaB)
	for _, want := range []string{"@eve, who may not write to the repository, pushed new commits", "`@mergegate queue`"} {
		if !strings.Contains(title, want) {
			t.Errorf("#1's check run reads %q, want %q", title, want)
		}
	}
	// The cron's pass tries it again: still held, said once.
	h.cronPass()
	h.settle()
	if len(h.merges()) != 1 {
		t.Fatalf("merged after the cron's pass: %+v", h.merges())
	}
	h.clock.Advance(time.Minute) // alice reads eve's commits
	h.commentCommand(1, "alice", "@mergegate queue")
	h.eventually("#1 merged at eve's head", func() bool { return len(h.merges()) == 2 && h.merges()[1].SHA == shaB })
}

// A push by a writer, and mergegate's own update of a branch behind a
// strict base (the synchronize's sender is its bot), keep the consent.
func TestPushByAWriterOrMergegateKeepsTheConsent(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRole(testRepo, "alice", "write")
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, true)
	shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}, Author: "alice"})
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, shaA, "automerge"), "alice"))
	h.settle()
	h.pushBy(1, shaB, "alice")
	h.gh.SetBehind(testRepo, 1, true)
	h.pass(shaB)
	h.eventually("the branch update", func() bool { return len(h.gh.BranchUpdates()) == 1 })
	up := h.gh.BranchUpdates()[0]
	h.mustSend("pull_request", withSender(t, h.prPayload("synchronize", 1, up.ToSHA, "automerge"), fakegithub.AppBotLogin))
	h.pass(up.ToSHA)
	h.eventually("#1 merged at the updated head", func() bool { return len(h.merges()) == 1 && h.merges()[0].SHA == up.ToSHA })
}

// A merge train: a fork's pull request in a group testing, its author
// pushes. It leaves the group, and its new head is never merged into a
// mergegate branch (where CI runs with the repository's secrets) nor
// landed until a writer consents; then it lands.
func TestTrainPushByANonWriterLeavesTheTrain(t *testing.T) {
	h := trainHarness(t, "mode: train\n", fakegithub.CI{})
	h.gh.AllowPush(testRepo, testBase)
	h.gh.SetRole(testRepo, "alice", "write")
	pr := h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, BaseRef: testBase, Labels: []string{"automerge"}, Author: "eve", Fork: true, LabeledBy: "alice"})
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, pr.HeadSHA, "automerge"), "alice"))
	h.openLabeled(2)
	h.runCI(10, func() bool {
		gs := h.groups()
		return len(gs) == 1 && gs[0].State == leasedo.GroupTesting && len(gs[0].PRs) == 2
	})
	newHead := strings.Repeat("e", 40)
	h.pushBy(1, newHead, "eve")
	h.settle()
	h.runCI(20, func() bool { return len(h.liveQueue()) == 1 && len(h.groups()) == 0 })
	h.landedOnlyTested(2)
	for _, w := range h.gh.RefWrites() {
		if w.Head == newHead {
			t.Fatalf("eve's head was merged into %s", w.Branch)
		}
	}
	if q := h.liveQueue(); q[0].PRNumber != 1 || !strings.Contains(q[0].GateReason, "@eve, who may not write to the repository, pushed new commits") {
		t.Fatalf("queue = %+v, want #1 held for a writer", q)
	}
	if title := h.lastTitle(newHead); !strings.Contains(title, "no writer consented to this head: @eve") {
		t.Errorf("#1's check run reads %q", title)
	}
	h.commentCommand(1, "alice", "@mergegate queue")
	h.runCI(20, h.queueEmpty)
	h.landedOnlyTested(1, 2)
}

// Closed and reopened by its author, who may not write, on a head pushed
// meanwhile: the label was a writer's consent to an earlier head. It is
// back in the queue, held, until a writer consents.
func TestReopenedByANonWriterNeedsAWritersConsent(t *testing.T) {
	h := newHarness(t)
	h.gh.SetRole(testRepo, "alice", "write")
	shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}, Author: "eve", Fork: true, LabeledBy: "alice"})
	h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, shaA, "automerge"), "alice"))
	h.settle()
	h.gh.UpdatePR(testRepo, 1, func(pr *fakegithub.PR) { pr.State = "closed" })
	h.mustSend("pull_request", withSender(t, h.prPayload("closed", 1, shaA, "automerge"), "eve"))
	h.settle()
	h.gh.UpdatePR(testRepo, 1, func(pr *fakegithub.PR) { pr.State, pr.HeadSHA = "open", shaB })
	h.mustSend("pull_request", withSender(t, h.prPayload("reopened", 1, shaB, "automerge"), "eve"))
	h.pass(shaB)
	h.settle()
	if len(h.merges()) != 0 {
		t.Fatalf("merged: %+v", h.merges())
	}
	if q := h.liveQueue(); len(q) != 1 || !strings.Contains(q[0].GateReason, "@eve, who may not write to the repository, reopened it") {
		t.Fatalf("queue = %+v, want #1 held for a writer", q)
	}
	h.clock.Advance(time.Minute) // alice reads the reopened head
	h.commentCommand(1, "alice", "@mergegate queue")
	h.eventually("#1 merged", func() bool { return len(h.merges()) == 1 && h.merges()[0].SHA == shaB })
}

// A writer's `@mergegate queue` whose delivery comes after a push that
// followed the comment (a retry, a redelivery after an outage) does not
// consent to that push: the command reads the head when it is carried out,
// and its consent is for a head its writer could have seen. alice is
// told to comment again; nothing merges. A comment written after the push
// was known queues it.
func TestLateQueueCommandDoesNotConsentALaterPush(t *testing.T) {
	for _, queued := range []bool{false, true} {
		t.Run(map[bool]string{false: "not queued", true: "queued"}[queued], func(t *testing.T) {
			h := newHarness(t)
			h.gh.SetRole(testRepo, "alice", "write")
			shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
			h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Author: "eve", Fork: true, LabeledBy: "alice"})
			if queued {
				h.gh.SetLabels(testRepo, 1, "automerge")
				h.mustSend("pull_request", withSender(t, h.prPayload("labeled", 1, shaA, "automerge"), "alice"))
			}
			h.settle()
			// alice reads shaA and comments; a minute later eve pushes
			// shaB, whose delivery is applied before alice's comment's.
			wrote := h.clock.Now()
			h.clock.Advance(time.Minute)
			h.pushBy(1, shaB, "eve")
			h.pass(shaB)
			h.settle()
			h.clock.Advance(2 * time.Minute)
			h.commentCommandAt(1, "alice", "@mergegate queue", wrote)
			h.settle()
			if len(h.merges()) != 0 {
				t.Fatalf("merged eve's push on a comment written before it: %+v", h.merges())
			}
			var told []string
			for _, c := range h.gh.Comments() {
				if c.PRNumber == 1 && strings.Contains(c.Body, "cannot tell that it was pushed before you wrote this comment") {
					told = append(told, c.Body)
				}
			}
			if len(told) != 1 || !strings.Contains(told[0], "@alice") || !strings.Contains(told[0], "bbbbbbb") {
				t.Fatalf("alice was told %q, want one sentence naming the head", told)
			}
			// alice reads shaB and comments again: it is queued and merges.
			h.clock.Advance(time.Minute)
			h.commentCommand(1, "alice", "@mergegate queue")
			h.eventually("#1 merged at eve's head", func() bool { return len(h.merges()) == 1 && h.merges()[0].SHA == shaB })
		})
	}
}

// A pull request nobody queued yet: alice, who may write, comments
// `@mergegate queue`; ten seconds later its author pushes, and the push's
// delivery is applied before the comment's (a retry, a redelivery). Within
// a minute of the comment, the command still does not consent to a head
// mergegate learnt of after it was written, moved by someone who may not
// write: alice is told to comment again, and nothing merges. The push cost
// no request to GitHub. The same push by a writer is consented to (a
// consent follows a writer's push), and so is one by eve that mergegate
// knew of before the comment.
func TestQueueCommandDoesNotConsentAPushWhoseDeliveryCameFirst(t *testing.T) {
	for _, tc := range []struct {
		name, pusher string
		before       time.Duration // the push, after the comment (negative: before it)
		consented    bool
	}{
		{"pushed after the comment by its author, who may not write", "eve", 10 * time.Second, false},
		{"pushed after the comment by a writer", "bob", 10 * time.Second, true},
		{"pushed a minute before the comment by its author", "eve", -time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.gh.SetRole(testRepo, "alice", "write")
			h.gh.SetRole(testRepo, "bob", "write")
			shaA, shaB := strings.Repeat("a", 40), strings.Repeat("b", 40)
			h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Author: "eve", Fork: true})
			h.settle()
			wrote := h.clock.Now()
			if tc.before < 0 {
				wrote = wrote.Add(-tc.before)
			}
			h.clock.Set(wrote.Add(tc.before))
			calls := len(h.gh.Calls())
			h.gh.SetHead(testRepo, 1, shaB)
			h.mustSend("pull_request", withSender(t, h.prPayload("synchronize", 1, shaB), tc.pusher))
			h.settle()
			if got := h.gh.Calls()[calls:]; len(got) != 0 {
				t.Errorf("a push to a pull request not queued made %d requests to GitHub: %+v", len(got), got)
			}
			h.pass(shaB)
			h.clock.Set(wrote.Add(30 * time.Second))
			h.commentCommandAt(1, "alice", "@mergegate queue", wrote)
			h.settle()
			var told []string
			for _, c := range h.gh.Comments() {
				if c.PRNumber == 1 && strings.Contains(c.Body, "cannot tell that it was pushed before you wrote this comment") {
					told = append(told, c.Body)
				}
			}
			if tc.consented {
				if len(told) != 0 {
					t.Fatalf("alice was told %q", told)
				}
				h.eventually("#1 merged at the new head", func() bool { return len(h.merges()) == 1 && h.merges()[0].SHA == shaB })
				return
			}
			if len(h.merges()) != 0 || len(h.liveQueue()) != 0 {
				t.Fatalf("queued %+v, merged %+v: a push after the comment was consented to", h.liveQueue(), h.merges())
			}
			if len(told) != 1 || !strings.Contains(told[0], "@alice") || !strings.Contains(told[0], "bbbbbbb") {
				t.Fatalf("alice was told %q, want one sentence naming the head", told)
			}
		})
	}
}
