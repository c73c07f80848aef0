package policy_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/policy"
	"github.com/mergegate/mergegate/rules"
)

const name = "octo/widgets:.github/mergegate.yml"

func defaults() rules.Policy {
	return rules.Policy{Triggers: rules.DefaultOptions(), MergeMethod: "merge", CheckTimeout: time.Hour}
}

func parse(t *testing.T, yml string) policy.Effective {
	t.Helper()
	f, ps := policy.Parse(name, []byte(yml))
	if len(ps) > 0 {
		t.Fatalf("Parse: %v", ps)
	}
	return policy.Effective{Source: policy.SourceRepo, File: name, Config: f, Defaults: defaults()}
}

// Every key, as the policy of a base branch sees it.
func TestKeys(t *testing.T) {
	e := parse(t, `
trigger_labels: [ship-it, lgtm]
auto_merge_trigger: false
label_requires_write: true
blocking_labels: [do-not-merge]
blocking_title: "^WIP"
priority_labels: [urgent, high]
branches: [main, "release-*"]
delete_branch_after_merge: true
merge_method: squash
merge_commit:
  title: "{title} (#{number})"
  message: "{body}\n\n{co_authors}"
check_timeout: 30m
update_method: merge
frozen: false
base_branches:
  release-1.x:
    merge_method: merge
    frozen: true
    freeze_message: release in progress
    check_timeout: never
    update_method: rebase
  next:
    mode: train
    batch_size: 8
    parallel: 3
    retries: 1
    landing: replay
    batch_wait: 0
`)
	main := e.For("main")
	if got := main.Triggers.Labels(); !reflect.DeepEqual(got, []string{"ship-it", "lgtm"}) || main.Triggers.AutoMergeTrigger {
		t.Errorf("triggers = %+v", main.Triggers)
	}
	if !main.Triggers.HasQueue("release-2.0") || main.Triggers.HasQueue("dev") {
		t.Errorf("branches = %v", main.Triggers.Branches)
	}
	if main.MergeMethod != "squash" || main.MethodFrom != "merge_method in .github/mergegate.yml" {
		t.Errorf("merge method %q from %q", main.MergeMethod, main.MethodFrom)
	}
	if main.CheckTimeout != 30*time.Minute || main.UpdateMethod != "merge" || !main.DeleteBranch || !main.LabelRequiresWrite {
		t.Errorf("main = %+v", main)
	}
	if main.Frozen || main.BlockingTitle.String() != "^WIP" || !reflect.DeepEqual(main.BlockingLabels, []string{"do-not-merge"}) {
		t.Errorf("main = %+v", main)
	}
	if main.CommitTitle != "{title} (#{number})" || main.CommitMessage != "{body}\n\n{co_authors}" {
		t.Errorf("templates %q %q", main.CommitTitle, main.CommitMessage)
	}
	rel := e.For("release-1.x")
	if rel.MergeMethod != "merge" || rel.MethodFrom != "base_branches.release-1.x.merge_method in .github/mergegate.yml" {
		t.Errorf("release merge method %q from %q", rel.MergeMethod, rel.MethodFrom)
	}
	if !rel.Frozen || rel.FreezeMessage != "release in progress" || rel.CheckTimeout != 0 || rel.UpdateMethod != "rebase" {
		t.Errorf("release = %+v", rel)
	}
	if main.InTrain() || main.Train != (rules.Train{BatchSize: 4, Parallel: 4, Landing: rules.LandFastForward, BatchWait: rules.DefaultBatchWait}) {
		t.Errorf("main's train = %q %+v, want serial with the defaults", main.Mode, main.Train)
	}
	if next := e.For("next"); !next.InTrain() || next.Train != (rules.Train{BatchSize: 8, Parallel: 3, Retries: 1, Landing: rules.LandReplay, BatchWait: rules.NoBatchWait}) {
		t.Errorf("next's train = %q %+v", next.Mode, next.Train)
	}
}

// No file, an empty file and a file of comments are the defaults.
func TestEmptyIsDefaults(t *testing.T) {
	for _, yml := range []string{"", "# nothing yet\n", "---\n"} {
		e := parse(t, yml)
		if got := e.For("main"); !reflect.DeepEqual(got, e.Defaults) && (got.MergeMethod != "merge" || got.CheckTimeout != time.Hour) {
			t.Errorf("%q: %+v", yml, got)
		}
		if got := e.Options().Labels(); !reflect.DeepEqual(got, []string{"automerge"}) {
			t.Errorf("%q: labels %v", yml, got)
		}
	}
}

// Each kind of mistake is refused with its line and what is wanted.
func TestProblems(t *testing.T) {
	tests := []struct {
		name, yml string
		want      []string // Problem.String(), in line order
	}{
		{"an unknown key, with the key it was probably meant to be",
			"merge_method: squash\nblocking_label: [do-not-merge]\n",
			[]string{name + `:2:1: unknown key "blocking_label" (did you mean "blocking_labels"?)`}},
		{"an unknown key unlike any",
			"colour: blue\n",
			[]string{name + `:1:1: unknown key "colour"`}},
		{"an unknown key under base_branches",
			"base_branches:\n  main:\n    merge_metod: squash\n",
			[]string{name + `:3:5: unknown key "base_branches.main.merge_metod" (did you mean "merge_method"?)`}},
		{"a string where a list is wanted (Kodiak users' most common slip)",
			"blocking_labels: do-not-merge\n",
			[]string{name + `:1:18: blocking_labels: want a list, e.g. blocking_labels: [do-not-merge], not "do-not-merge"`}},
		{"a word where true or false is wanted",
			"frozen: yes please\n",
			[]string{name + `:1:9: frozen: want true or false, not "yes please"`}},
		{"a list where a string is wanted",
			"merge_method: [squash]\n",
			[]string{name + `:1:15: merge_method: want a string, not a list`}},
		{"a method that does not exist",
			"merge_method: fast-forward\n",
			[]string{name + `:1:15: merge_method "fast-forward": want merge, squash or rebase`}},
		{"a per-branch method that does not exist",
			"base_branches:\n  main:\n    merge_method: squish\n",
			[]string{name + `:3:19: base_branches.main.merge_method "squish": want merge, squash or rebase`}},
		{"a mode that does not exist",
			"mode: parallel\n",
			[]string{name + `:1:7: mode "parallel": want serial or train`}},
		{"a batch size that is not a number",
			"batch_size: four\n",
			[]string{name + `:1:13: batch_size: want a whole number, not "four"`}},
		{"a train setting out of range",
			"base_branches:\n  main:\n    parallel: 0\n    landing: rebase\n",
			[]string{name + `:3:15: base_branches.main.parallel 0: want 1 to 32`, name + `:4:14: base_branches.main.landing "rebase": want fast-forward or replay`}},
		{"an update method that does not exist",
			"update_method: squash\n",
			[]string{name + `:1:16: update_method "squash": want merge or rebase`}},
		{"a timeout that is no duration",
			"check_timeout: an hour\n",
			[]string{name + `:1:16: check_timeout "an hour": want a duration such as 30m or 2h, or never`}},
		{"a title pattern that is no regular expression",
			"blocking_title: \"^WIP(\"\n",
			[]string{name + `:1:17: blocking_title "^WIP(" is not a regular expression: error parsing regexp: missing closing ): ` + "`^WIP(`"}},
		{"an unknown placeholder in a template",
			"merge_commit:\n  title: \"{tittle} (#{number})\"\n",
			[]string{name + `:2:10: merge_commit.title: unknown placeholder {tittle}: want one of {number}, {title}, {body}, {author}, {co_authors}`}},
		{"a key from another tool's vocabulary",
			"freeze: true\n",
			[]string{name + `:1:1: unknown key "freeze" (did you mean "frozen"?)`}},
		{"a key set twice",
			"frozen: true\nfrozen: false\n",
			nil}, // YAML itself refuses it; checked below
		{"the file is a list, not a mapping",
			"- merge_method: squash\n",
			[]string{name + `:1:1: the file: want a mapping of keys to values, not a list`}},
		{"several problems, each on its line",
			"merge_method: fast\nfrozen: 1\ncolour: blue\n",
			[]string{name + `:2:9: frozen: want true or false, not "1"`, name + `:3:1: unknown key "colour"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, ps := policy.Parse(name, []byte(tt.yml))
			if len(ps) == 0 {
				t.Fatalf("no problem found; parsed %+v", f)
			}
			if tt.want == nil {
				if ps[0].Line == 0 {
					t.Errorf("no line: %v", ps)
				}
				return
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.String())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems:\n got  %q\n want %q", got, tt.want)
			}
		})
	}
}

// A YAML syntax error has its line too.
func TestYAMLError(t *testing.T) {
	_, ps := policy.Parse(name, []byte("merge_method: squash\nblocking_labels: [a, b\nfrozen: true\n"))
	if len(ps) != 1 || ps[0].Line == 0 || !strings.HasPrefix(ps[0].Msg, "not valid YAML") {
		t.Fatalf("problems = %+v", ps)
	}
}

func TestValuesSayWhereEachCameFrom(t *testing.T) {
	e := parse(t, "merge_method: squash\nbase_branches:\n  release:\n    frozen: true\n")
	got := map[string]policy.Value{}
	for _, v := range e.Values() {
		got[v.Key] = v
	}
	if v := got["merge_method"]; v.Value != "squash" || v.From != "file ("+name+")" {
		t.Errorf("merge_method = %+v", v)
	}
	if v := got["check_timeout"]; v.Value != "1h0m0s" || v.From != "default (--check-timeout)" {
		t.Errorf("check_timeout = %+v", v)
	}
	if v := got["base_branches.release.frozen"]; v.Value != "true" {
		t.Errorf("base_branches.release.frozen = %+v", v)
	}
	e.Source = policy.SourceOrg
	for _, v := range e.Values() {
		if v.Key == "merge_method" && !strings.HasPrefix(v.From, "organisation") {
			t.Errorf("from the organisation's file: %+v", v)
		}
	}
}

func TestTemplates(t *testing.T) {
	c := policy.CommitInfo{Number: 7, Title: "Fix it", Body: "Because.", Author: "alice",
		CoAuthors: []string{"Co-authored-by: Bob <bob@example.com>"}}
	if got := policy.Render("{title} (#{number})", c); got != "Fix it (#7)" {
		t.Errorf("title = %q", got)
	}
	if got := policy.Render("{body}\n\nby @{author}\n{co_authors}", c); got != "Because.\n\nby @alice\nCo-authored-by: Bob <bob@example.com>" {
		t.Errorf("message = %q", got)
	}
	if got := policy.Render("{{literal}} {number}", c); got != "{literal} 7" {
		t.Errorf("braces = %q", got)
	}
	if err := policy.CheckTemplate("{title"); err == nil {
		t.Error("an open brace is refused")
	}
}

func TestPriorityOf(t *testing.T) {
	list := []string{"urgent", "high"}
	for _, c := range []struct {
		labels []string
		rank   int
		name   string
	}{
		{[]string{"bug", "High"}, 1, "high"},
		{[]string{"high", "urgent"}, 2, "urgent"},
		{nil, 0, ""},
	} {
		if rank, name := policy.PriorityOf(list, c.labels); rank != c.rank || name != c.name {
			t.Errorf("%v: %d %q", c.labels, rank, name)
		}
	}
}
