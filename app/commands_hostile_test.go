package app

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

// comment is GitHub's issue_comment example as a comment by user with
// body on pull request #1, under its own comment id.
func (h *harness) comment(id int64, user, body string) []byte {
	h.t.Helper()
	h.gh.AddCommentID(testRepo, 1, id, user, body)
	return h.fixture("issue_comment/created.with-installation.payload.json", func(m map[string]any) {
		obj(m, "issue")["pull_request"] = map[string]any{"url": "https://api.github.com/repos/" + testRepo + "/pulls/1"}
		c := obj(m, "comment")
		c["id"], c["body"] = id, body
		obj(c, "user")["login"] = user
	})
}

// Issue 30, hole 1: 3 comments of ~65 KB of "@mergegate" lines and 150
// one-line comments from a user who may not write made one reply per
// command line (on 8d91ea6: thousands). Now each comment carries one
// command, the user is told once, the next 10 comments within the hour get
// a reaction instead and the others nothing (a reaction is a write too):
// 11 writes in all. An hour later they are told again.
func TestHostileCommentsGetOneReply(t *testing.T) {
	h := newHarness(t)
	h.gh.AddPR(testRepo, fakegithub.PR{Number: 1, HeadSHA: "a1", BaseRef: testBase, Author: "octocat"})
	big := strings.Repeat("@mergegate queue\n@mergegate merge now\n", 65000/38)
	id := int64(1000)
	for range 3 {
		id++
		h.mustSend("issue_comment", h.comment(id, "stranger", big))
	}
	for range 150 {
		id++
		h.mustSend("issue_comment", h.comment(id, "stranger", "@mergegate queue"))
	}
	h.settle()
	replies := h.gh.Comments()
	if len(replies) != 1 || !strings.HasPrefix(replies[0].Body, "@stranger: only people who can write") {
		t.Fatalf("%d replies to 153 hostile comments, want 1: %+v", len(replies), replies[:min(len(replies), 3)])
	}
	confused := 0
	for _, r := range h.gh.Reactions() {
		if r.Content == "confused" {
			confused++
		}
	}
	if confused != 10 {
		t.Errorf("%d confused reactions, want 10 (then nothing) for the 152 comments not replied to", confused)
	}
	audit, err := h.app.Store.Audit(context.Background(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, a := range audit {
		if a.Action == leasedo.AuditCommand && strings.Contains(a.Reason, "refused: @stranger may not write") {
			refused++
		}
	}
	if refused != 153 {
		t.Errorf("%d refusals in the audit log, want one per comment (153)", refused)
	}
	if len(h.queue()) != 0 {
		t.Errorf("queue = %+v, want nothing queued", h.queue())
	}

	h.clock.Advance(time.Hour)
	h.mustSend("issue_comment", h.comment(id+1, "stranger", "@mergegate queue"))
	h.settle()
	if n := len(h.gh.Comments()); n != 2 {
		t.Errorf("%d replies after an hour, want the user told again (2)", n)
	}
}
