package loadgen

import (
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

// The generated deliveries are GitHub's examples, edited: each parses and
// translates into the queue event its turn calls for, for its repository.
func TestDeliveries(t *testing.T) {
	gen, err := New("", 3, 2, 77)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	// Repository i%3; PRs take turns; rounds: labeled, synchronize, check_suite.
	want := []struct {
		event, action string
		pr            int
	}{
		{"pull_request", "labeled", 1}, {"pull_request", "labeled", 1}, {"pull_request", "labeled", 1},
		{"pull_request", "labeled", 2}, {"pull_request", "labeled", 2}, {"pull_request", "labeled", 2},
		{"pull_request", "synchronize", 1}, {"pull_request", "synchronize", 1}, {"pull_request", "synchronize", 1},
		{"pull_request", "synchronize", 2}, {"pull_request", "synchronize", 2}, {"pull_request", "synchronize", 2},
		{"check_suite", "completed", 0}, {"check_suite", "completed", 0}, {"check_suite", "completed", 0},
		{"check_suite", "completed", 0}, {"check_suite", "completed", 0}, {"check_suite", "completed", 0},
		{"pull_request", "labeled", 1},
	}
	shas := map[string]string{} // repo#pr -> head after synchronize
	for i, w := range want {
		event, id, body := gen.Delivery(0, int64(i))
		if ids[id] {
			t.Fatalf("delivery %d: id %s repeats", i, id)
		}
		ids[id] = true
		meta, err := webhook.Parse(event, body)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		repo := Org + "/repo-000" + string(rune('0'+i%3))
		if event != w.event || meta.Tenant != "77" || meta.Repo != repo {
			t.Fatalf("delivery %d: %s %+v, want %s for %s under 77", i, event, meta, w.event, repo)
		}
		tr, err := webhook.Translate(leasedo.Delivery{ID: id, Event: event, Action: meta.Action, Tenant: meta.Tenant, Repo: meta.Repo, Body: body}, rules.DefaultOptions())
		// A synchronize also asks the sync to check who pushed (the
		// consent of a queued pull request is for its head).
		n := 1
		if w.action == "synchronize" {
			n = 2
		}
		if err != nil || len(tr.Events) != n || tr.Ignored != "" {
			t.Fatalf("delivery %d: translation %+v, %v", i, tr, err)
		}
		if n == 2 && (tr.Events[1].Op != leasedo.OpCommand || tr.Events[1].Details.Command != webhook.HeadMoveCommand) {
			t.Fatalf("delivery %d: second event %+v %+v, want the check of who pushed", i, tr.Events[1], tr.Events[1].Details)
		}
		ev := tr.Events[0]
		if ev.Action != w.action || ev.PRNumber != w.pr || len(ev.Details.Sha) != 40 {
			t.Fatalf("delivery %d: event %+v %+v, want %s #%d", i, ev, ev.Details, w.action, w.pr)
		}
		switch w.action {
		case "synchronize":
			shas[repo+string(rune('0'+w.pr))] = ev.Details.Sha
		case "completed": // at the head the synchronize set
			pr := 1 + (i-12)/3
			if got := shas[repo+string(rune('0'+pr))]; got != ev.Details.Sha {
				t.Fatalf("delivery %d: check_suite at %s, want the new head %s", i, ev.Details.Sha, got)
			}
		}
	}
}
