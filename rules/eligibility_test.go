package rules_test

import (
	"reflect"
	"testing"

	"github.com/mergegate/mergegate/rules"
)

// TestIneligibility states the eligibility rule (docs/queue.md), one row each:
// open, not a draft, and carrying the trigger label or with auto-merge
// enabled, each trigger on or off. The webhook translator and the sync
// both ask it; "" is eligible.
func TestIneligibility(t *testing.T) {
	def := rules.DefaultOptions()
	labelOff := rules.Options{AutoMergeTrigger: true}
	autoOff := rules.Options{TriggerLabel: rules.DefaultTriggerLabel}
	bothOff := rules.Options{}
	custom := rules.Options{TriggerLabel: "ready-to-merge"}
	several := rules.Options{TriggerLabel: "automerge", TriggerLabels: []string{"ship-it", "lgtm"}}
	branches := rules.Options{TriggerLabel: "automerge", Branches: []string{"main", "release-*"}}
	onBase := func(base string, labels ...string) rules.Eligibility {
		return rules.Eligibility{State: "open", Base: base, Labels: labels}
	}
	open := func(labels ...string) rules.Eligibility { return rules.Eligibility{State: "open", Labels: labels} }
	withAuto := func(e rules.Eligibility) rules.Eligibility { e.AutoMerge = true; return e }
	tests := []struct {
		name string
		e    rules.Eligibility
		opt  rules.Options
		want string
	}{
		{"open with the label is eligible", open("bug", "automerge"), def, ""},
		{"the label is matched case-insensitively, as GitHub does", open("AutoMerge"), def, ""},
		{"open with auto-merge is eligible", withAuto(open()), def, ""},
		{"label and auto-merge both: eligible", withAuto(open("automerge")), def, ""},
		{"neither trigger", open("bug"), def, `no "automerge" label and auto-merge is not enabled`},
		{"closed", rules.Eligibility{State: "closed", Labels: []string{"automerge"}}, def, "pull request is closed"},
		{"no state is not open", rules.Eligibility{Labels: []string{"automerge"}}, def, "pull request is in an unknown state"},
		{"a draft is not eligible, label or not", rules.Eligibility{State: "open", Draft: true, Labels: []string{"automerge"}, AutoMerge: true}, def, "pull request is a draft"},
		{"closed wins over draft", rules.Eligibility{State: "closed", Draft: true}, def, "pull request is closed"},
		{"label trigger off: the label alone does not count", open("automerge"), labelOff, "auto-merge is not enabled"},
		{"label trigger off: auto-merge counts", withAuto(open()), labelOff, ""},
		{"auto-merge trigger off: auto-merge alone does not count", withAuto(open()), autoOff, `no "automerge" label`},
		{"auto-merge trigger off: the label counts", open("automerge"), autoOff, ""},
		{"both triggers off: nothing is eligible", withAuto(open("automerge")), bothOff, "both triggers (label and auto-merge) are off"},
		{"a custom label replaces automerge", open("automerge"), custom, `no "ready-to-merge" label`},
		{"a custom label counts", open("Ready-To-Merge"), custom, ""},
		{"trigger_labels: any of them counts", open("ship-it"), several, ""},
		{"trigger_labels replace the flag's label", open("automerge"), rules.Options{TriggerLabels: []string{"ship-it", "lgtm"}}, `no "ship-it" or "lgtm" label`},
		{"trigger_labels empty: the label trigger is off", open("automerge"), rules.Options{TriggerLabels: []string{}}, "both triggers (label and auto-merge) are off"},
		{"branches: a base that matches a pattern has a queue", onBase("release-1.x", "automerge"), branches, ""},
		{"branches: a base by name has a queue", onBase("main", "automerge"), branches, ""},
		{"branches: another base has none", onBase("dev", "automerge"), branches, "its base branch dev has no queue (branches: main, release-*)"},
		{"branches: an unknown base is not refused", open("automerge"), branches, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.Ineligibility(tt.e, tt.opt); got != tt.want {
				t.Errorf("Ineligibility(%+v, %+v) = %q, want %q", tt.e, tt.opt, got, tt.want)
			}
		})
	}
}

func TestHasLabel(t *testing.T) {
	if !rules.HasLabel([]string{"bug", "AUTOMERGE"}, "automerge") {
		t.Error("HasLabel is case-insensitive")
	}
	if rules.HasLabel(nil, "automerge") || rules.HasLabel([]string{"automerge-later"}, "automerge") {
		t.Error("HasLabel matches whole names only")
	}
}

func TestDefaultOptions(t *testing.T) {
	if got := rules.DefaultOptions(); !reflect.DeepEqual(got, rules.Options{TriggerLabel: "automerge", AutoMergeTrigger: true}) {
		t.Errorf("DefaultOptions() = %+v", got)
	}
}
