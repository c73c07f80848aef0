package webhook

import (
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate"
)

// Events is app.yml's default_events, the installation events every App
// receives, and ping: nothing more, nothing less.
func TestEventsAreAppYmlsEvents(t *testing.T) {
	var m struct {
		Events []string `yaml:"default_events"`
	}
	if err := yaml.Unmarshal(mergegate.AppManifest, &m); err != nil {
		t.Fatal(err)
	}
	want := append(m.Events, "installation", "installation_repositories", "ping")
	slices.Sort(want)
	got := slices.Sorted(slices.Values(Events))
	if !slices.Equal(got, want) {
		t.Errorf("Events = %v, want %v", got, want)
	}
	if EventLabel("pull_\xffrequest") != "other" || EventLabel("push") != "push" {
		t.Error("EventLabel")
	}
}
