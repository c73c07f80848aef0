package webhook

import (
	"reflect"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

func TestCommands(t *testing.T) {
	got := Commands("Looks good.\n@mergegate queue\n  @MergeGate priority HIGH\n> @mergegate cancel\n@mergegate priority urgent\n@mergegate\n@mergegatebot queue\n@mergegate refresh please")
	want := []Command{
		{Name: "queue"},
		{Name: "priority", Arg: "high"},
		{Name: "invalid", Arg: "@mergegate priority urgent"},
		{Name: "invalid", Arg: "@mergegate"},
		{Name: "invalid", Arg: "@mergegate refresh please"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Commands:\n got  %+v\n want %+v", got, want)
	}
}

func comment(body, userType string, onPR bool) func(m map[string]any) {
	return func(m map[string]any) {
		m["action"] = "created"
		issue := map[string]any{"number": 2}
		if onPR {
			issue["pull_request"] = map[string]any{"url": "https://api.github.com/repos/Codertocat/Hello-World/pulls/2"}
		}
		m["issue"] = issue
		m["comment"] = map[string]any{"id": 77, "body": body, "user": map[string]any{"login": "alice", "type": userType}}
	}
}

func TestTranslateIssueComment(t *testing.T) {
	// No issue_comment example is in the fixtures: built on a neighbour's
	// envelope (repository, installation) with GitHub's issue and comment.
	tr := translateFixture(t, "issue_comment", "pull_request/labeled.payload.json", rules.DefaultOptions(), comment("@mergegate priority low", "User", true))
	if len(tr.Events) != 1 {
		t.Fatalf("translation = %+v", tr)
	}
	ev := tr.Events[0]
	if ev.Op != leasedo.OpCommand || ev.PRNumber != 2 || ev.Details.Command != "priority" || ev.Details.Arg != "low" || ev.Details.By != "alice" || ev.Details.CommentID != 77 {
		t.Errorf("event = %+v %+v", ev, ev.Details)
	}
	for name, edit := range map[string]func(m map[string]any){
		"a comment on an issue":         comment("@mergegate queue", "User", false),
		"a comment by a bot":            comment("@mergegate queue", "Bot", true),
		"no @mergegate command":         comment("LGTM", "User", true),
		"issue_comment action \"edited": func(m map[string]any) { comment("@mergegate queue", "User", true)(m); m["action"] = "edited" },
	} {
		tr := translateFixture(t, "issue_comment", "pull_request/labeled.payload.json", rules.DefaultOptions(), edit)
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
