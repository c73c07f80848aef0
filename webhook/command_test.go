package webhook

import (
	"testing"
	"time"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// A comment carries one command: its first command line as GitHub shows
// the comment; quotations, code and HTML comments are not commands.
func TestFirstCommand(t *testing.T) {
	for _, tc := range []struct {
		body string
		want Command
		ok   bool
	}{
		{"Looks good.\n@mergegate queue\n  @MergeGate priority HIGH\n@mergegate cancel", Command{Name: "queue"}, true},
		{"  @MergeGate priority HIGH\r\n@mergegate queue", Command{Name: "priority", Arg: "high"}, true},
		{"@mergegate priority urgent\n@mergegate queue", Command{Name: "invalid", Arg: "@mergegate priority urgent"}, true},
		{"@mergegate", Command{Name: "invalid", Arg: "@mergegate"}, true},
		{"@mergegate refresh please", Command{Name: "invalid", Arg: "@mergegate refresh please"}, true},
		{"@mergegatebot queue", Command{}, false},
		{"> @mergegate cancel\n>@mergegate cancel\n   > @mergegate cancel", Command{}, false},
		{"```\n@mergegate cancel\n```", Command{}, false},
		{"~~~~sh\n@mergegate cancel\n~~~\n@mergegate cancel\n~~~~", Command{}, false},
		{"```\n@mergegate cancel\n```\n@mergegate queue", Command{Name: "queue"}, true},
		{"    @mergegate cancel\n\t@mergegate cancel", Command{}, false},
		{"<!-- @mergegate cancel -->\n<!--\n@mergegate cancel\n-->", Command{}, false},
		{"<!-- x --> @mergegate queue", Command{Name: "queue"}, true},
		{"<!--\n@mergegate cancel\n--> @mergegate refresh", Command{Name: "refresh"}, true},
		{"", Command{}, false},
	} {
		got, ok := FirstCommand(tc.body)
		if got != tc.want || ok != tc.ok {
			t.Errorf("FirstCommand(%q) = %+v, %v; want %+v, %v", tc.body, got, ok, tc.want, tc.ok)
		}
	}
}

// issueCommentExample is GitHub's issue_comment example (octokit/webhooks):
// comment 492700400 by Codertocat on issue #1.
const issueCommentExample = "issue_comment/created.with-installation.payload.json"

// comment edits GitHub's example: the comment's body and its author's
// type; onPR makes issue #1 a pull request, as GitHub marks one: an
// issue.pull_request object (url, html_url, diff_url, patch_url,
// merged_at), absent on a plain issue.
func comment(body, userType string, onPR bool) func(m map[string]any) {
	return func(m map[string]any) {
		issue := m["issue"].(map[string]any)
		if onPR {
			issue["html_url"] = "https://github.com/Codertocat/Hello-World/pull/1"
			issue["pull_request"] = map[string]any{
				"url":       "https://api.github.com/repos/Codertocat/Hello-World/pulls/1",
				"html_url":  "https://github.com/Codertocat/Hello-World/pull/1",
				"diff_url":  "https://github.com/Codertocat/Hello-World/pull/1.diff",
				"patch_url": "https://github.com/Codertocat/Hello-World/pull/1.patch",
				"merged_at": nil,
			}
		}
		c := m["comment"].(map[string]any)
		c["body"] = body
		c["user"].(map[string]any)["type"] = userType
	}
}

func TestTranslateIssueComment(t *testing.T) {
	tr := translateFixture(t, "issue_comment", issueCommentExample, rules.DefaultOptions(), comment("Thanks!\n@mergegate priority low", "User", true))
	if len(tr.Events) != 1 {
		t.Fatalf("translation = %+v", tr)
	}
	ev := tr.Events[0]
	if ev.Op != leasedo.OpCommand || ev.PRNumber != 1 || ev.Details.Command != "priority" || ev.Details.Arg != "low" || ev.Details.By != "Codertocat" || ev.Details.CommentID != 492700400 {
		t.Errorf("event = %+v %+v", ev, ev.Details)
	}
	// When the comment was written (GitHub's created_at): the consent of a
	// queue command is for a head its writer could have seen.
	if want := time.Date(2019, 5, 15, 15, 20, 21, 0, time.UTC).UnixMilli(); ev.Details.CommentedAt != want {
		t.Errorf("CommentedAt = %d, want the comment's created_at %d", ev.Details.CommentedAt, want)
	}
	for name, edit := range map[string]func(m map[string]any){
		"GitHub's example as it stands":  func(map[string]any) {},
		"a comment on an issue":          comment("@mergegate queue", "User", false),
		"a comment by a bot":             comment("@mergegate queue", "Bot", true),
		"no @mergegate command":          comment("LGTM", "User", true),
		"issue_comment action \"edited":  func(m map[string]any) { comment("@mergegate queue", "User", true)(m); m["action"] = "edited" },
		"issue_comment action \"deleted": func(m map[string]any) { comment("@mergegate queue", "User", true)(m); m["action"] = "deleted" },
	} {
		tr := translateFixture(t, "issue_comment", issueCommentExample, rules.DefaultOptions(), edit)
		if len(tr.Events) != 0 || tr.Ignored == "" {
			t.Errorf("%s: %+v", name, tr)
		}
	}
}

// label_requires_write: a labeled join carries who added the label.
func TestLabelRequiresWriteCarriesTheSender(t *testing.T) {
	opt := rules.Options{TriggerLabels: []string{"bug"}, LabelRequiresWrite: true}
	tr := translateFixture(t, "pull_request", "pull_request/labeled.payload.json", opt, func(map[string]any) {})
	if len(tr.Events) != 2 || tr.Events[1].Op != leasedo.OpCommand || tr.Events[1].Details.Command != "label" || tr.Events[1].Details.By != "Codertocat" {
		t.Errorf("events = %+v", tr.Events)
	}
}
