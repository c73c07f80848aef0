package webhook

import (
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

func translateFixture(t *testing.T, event, from string, opt rules.Options, edit func(m map[string]any)) Translation {
	t.Helper()
	body := editJSON(t, readFixture(t, from), edit)
	tr, err := Translate(leasedo.Delivery{Event: event, Tenant: "1", Repo: helloWorld, Body: body}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A push to the default branch that adds, changes or removes
// .github/mergegate.yml marks the repository's policy to be read again;
// other pushes do not.
func TestPushTouchingThePolicyFile(t *testing.T) {
	commits := func(files ...string) func(m map[string]any) {
		return func(m map[string]any) {
			var list []any
			for _, f := range files {
				list = append(list, f)
			}
			m["commits"] = []any{
				map[string]any{"id": "c1", "added": []any{}, "removed": []any{}, "modified": []any{"README.md"}},
				map[string]any{"id": "c2", "added": []any{}, "removed": list, "modified": []any{}},
			}
		}
	}
	for _, c := range []struct {
		name   string
		edit   func(m map[string]any)
		policy bool
	}{
		{"removes it on the default branch", commits(".github/mergegate.yml"), true},
		{"touches other files", commits(".github/workflows/ci.yml"), false},
		{"touches it on another branch", func(m map[string]any) { commits(".github/mergegate.yml")(m); m["ref"] = "refs/heads/feature" }, false},
		{"a forced push listing no commits may have", func(m map[string]any) { m["commits"] = []any{}; m["forced"] = true }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := translateFixture(t, "push", "push/with-new-branch.payload.json", rules.DefaultOptions(), c.edit)
			got := len(tr.Events) == 1 && tr.Events[0].Op == leasedo.OpPolicy
			if got != c.policy || tr.Push == nil {
				t.Errorf("events %+v (push %v), want a policy re-read: %v", tr.Events, tr.Push, c.policy)
			}
		})
	}
}

// The translator decides under each repository's own triggers, and takes
// a join's priority from its labels.
func TestTranslateUnderTheRepositoryPolicy(t *testing.T) {
	perRepo := rules.DefaultOptions()
	perRepo.For = func(tenant, repo string) rules.Options {
		if repo != helloWorld {
			return rules.DefaultOptions()
		}
		return rules.Options{TriggerLabels: []string{"bug"}, PriorityLabels: []string{"urgent", "bug"}, BlockingLabels: []string{"do-not-merge"}}
	}
	tr := translateFixture(t, "pull_request", "pull_request/labeled.payload.json", perRepo, func(map[string]any) {})
	if len(tr.Events) != 1 || tr.Events[0].Op != leasedo.OpJoin || tr.Ignored != "" {
		t.Fatalf("labeled bug under trigger_labels [bug]: %+v", tr)
	}
	if d := tr.Events[0].Details; d.Priority == nil || *d.Priority != 1 || d.PriorityName != "bug" {
		t.Errorf("priority = %+v", d)
	}
	// The same delivery under the flags alone: not eligible.
	if tr := translateFixture(t, "pull_request", "pull_request/labeled.payload.json", rules.DefaultOptions(), func(map[string]any) {}); tr.Ignored == "" {
		t.Errorf("under the defaults a bug label joined: %+v", tr)
	}
	// A blocking label removed from a PR still eligible: read it again.
	tr = translateFixture(t, "pull_request", "pull_request/unlabeled.payload.json", perRepo, func(m map[string]any) {
		m["label"] = map[string]any{"name": "do-not-merge"}
		m["pull_request"].(map[string]any)["labels"] = []any{map[string]any{"name": "bug"}}
	})
	if len(tr.Events) != 1 || tr.Events[0].Op != leasedo.OpLabels {
		t.Errorf("unlabeled do-not-merge: %+v", tr)
	}
	// A base branch without a queue (branches).
	noQueue := rules.Options{TriggerLabels: []string{"bug"}, Branches: []string{"main"}}
	if tr := translateFixture(t, "pull_request", "pull_request/labeled.payload.json", noQueue, func(map[string]any) {}); tr.Ignored != "not eligible: its base branch master has no queue (branches: main)" {
		t.Errorf("ignored = %q", tr.Ignored)
	}
}
