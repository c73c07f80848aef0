package policy_test

import (
	"encoding/json"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/policy"
)

// docs/mergegate.schema.json (for editors) and File (what mergegate
// reads) name the same keys, at the top level, per base branch and in
// merge_commit.
func TestSchemaAgreesWithFile(t *testing.T) {
	b, err := os.ReadFile("../docs/mergegate.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		AdditionalProperties bool                       `json:"additionalProperties"`
		Properties           map[string]json.RawMessage `json:"properties"`
		Defs                 struct {
			Branch struct {
				AdditionalProperties bool `json:"additionalProperties"`
				Properties           map[string]struct {
					Properties map[string]any `json:"properties"`
				} `json:"properties"`
			} `json:"branch"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]json.RawMessage) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if got, want := keys(schema.Properties), policy.Keys(); !reflect.DeepEqual(got, want) {
		t.Errorf("top-level keys:\n schema %v\n File   %v", got, want)
	}
	var branch []string
	for k := range schema.Defs.Branch.Properties {
		branch = append(branch, k)
	}
	sort.Strings(branch)
	if want := policy.BranchKeys(); !reflect.DeepEqual(branch, want) {
		t.Errorf("base_branches keys:\n schema %v\n Branch %v", branch, want)
	}
	var mc []string
	for k := range schema.Defs.Branch.Properties["merge_commit"].Properties {
		mc = append(mc, k)
	}
	sort.Strings(mc)
	if want := []string{"message", "title"}; !reflect.DeepEqual(mc, want) {
		t.Errorf("merge_commit keys: %v", mc)
	}
	if schema.AdditionalProperties || schema.Defs.Branch.AdditionalProperties {
		t.Error("the schema must refuse unknown keys, as mergegate does")
	}
	// The schema's example file parses.
	if _, ps := policy.Parse("example", []byte(exampleFile)); len(ps) > 0 {
		t.Errorf("docs/configuration.md's example: %v", ps)
	}
}

// exampleFile is docs/configuration.md's example (TestConfigurationExample
// checks that the doc holds it).
const exampleFile = `trigger_labels: [automerge, ship-it]
blocking_labels: [do-not-merge]
blocking_title: "^(WIP|Draft)\\b"
priority_labels: [urgent, high]
merge_method: squash
merge_commit:
  title: "{title} (#{number})"
  message: "{body}\n\n{co_authors}"
delete_branch_after_merge: true
check_timeout: 90m
base_branches:
  release-1.x:
    merge_method: merge
    frozen: true
    freeze_message: "1.4 is being released; back on Monday"
`

// docs/configuration.md holds the example above and documents every key.
func TestConfigurationExample(t *testing.T) {
	b, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.Contains(doc, exampleFile) {
		t.Error("docs/configuration.md's example is not exampleFile (keep them the same)")
	}
	for _, k := range append(policy.Keys(), "merge_commit.title", "merge_commit.message") {
		if k == "merge_commit" {
			continue
		}
		if !strings.Contains(doc, "| `"+k+"`") && !strings.Contains(doc, ", `"+k+"` |") {
			t.Errorf("docs/configuration.md does not document %s in its table", k)
		}
	}
}
