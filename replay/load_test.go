package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/testkit"
)

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const goodDelivery = `{"event": "status", "delivery": "d-1", "headers": {}, "payload": {"sha": "` + sha1A + `", "context": "ci", "state": "success", "repository": {"full_name": "o/r"}, "installation": {"id": 7}}}`

func TestReadRecordedNamesWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	fixture := testkit.ReadTestdata(t, "github-webhooks", "pull_request", "labeled.payload.json")
	for _, c := range []struct {
		name, content, want string
	}{
		{"empty.json", "", "the file is empty"},
		{"garbage.json", "this is not JSON", "not a JSON object"},
		{"notes.txt", "remember the milk", "not a .json file"},
		{"array.json", `[{"event": "push"}]`, "not a JSON object"},
		{"truncated.json", `{"event": "push", "delivery": "x", "payload": {`, "truncated"},
		{"two.json", goodDelivery + goodDelivery, "more than one JSON value"},
		{"payload-only.json", string(fixture), `no "event"`},
		{"no-delivery.json", `{"event": "push", "payload": {}}`, `no "delivery"`},
		{"no-payload.json", `{"event": "push", "delivery": "x"}`, `no "payload"`},
		{"null-payload.json", `{"event": "push", "delivery": "x", "payload": null}`, `no "payload"`},
		{"array-payload.json", `{"event": "push", "delivery": "x", "payload": [1]}`, `"payload" is not a JSON object`},
		{"typed.json", `{"event": 5, "delivery": "x", "payload": {}}`, `field "event" has the wrong type`},
	} {
		path := writeFile(t, filepath.Join(dir, c.name), c.content)
		_, err := ReadRecorded(path)
		var bad *BadInputError
		if !errors.As(err, &bad) || bad.File != path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a BadInputError naming the file and saying %q", c.name, err, c.want)
		}
	}
	rec, err := ReadRecorded(writeFile(t, filepath.Join(dir, "good.json"), goodDelivery))
	if err != nil || rec.Event != "status" || rec.Delivery != "d-1" {
		t.Fatalf("good delivery: %+v, %v", rec, err)
	}
}

func TestLoadReplayFolder(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "000002-status-b.json"), strings.Replace(goodDelivery, "d-1", "b", 1))
	writeFile(t, filepath.Join(dir, "000001-status-a.json"), strings.Replace(goodDelivery, "d-1", "a", 1))
	writeFile(t, filepath.Join(dir, "README.md"), "# my recording\n")
	writeFile(t, filepath.Join(dir, "notes.txt"), "PR 2 was behind\n")
	writeFile(t, filepath.Join(dir, "expected.golden"), "{}\n")                   // passed over
	writeFile(t, filepath.Join(dir, ".000003-status-c.json.tmp"), "half a file")  // passed over (hidden)
	writeFile(t, filepath.Join(dir, "sub", "000009-status-z.json"), goodDelivery) // not descended into
	writeFile(t, filepath.Join(dir, ScenarioFile), `{"required": {"main": {"contexts": ["ci"], "strict": true}}, "behind": [2]}`)

	in, skipped, err := Load([]string{dir}, false)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range in.Deliveries {
		ids = append(ids, d.Delivery)
	}
	if strings.Join(ids, ",") != "a,b" {
		t.Fatalf("deliveries %v, want a,b (name order)", ids)
	}
	if len(skipped) != 2 || !strings.Contains(skipped[0].Error(), "README.md") || !strings.Contains(skipped[1].Error(), "notes.txt") {
		t.Fatalf("skipped = %v, want README.md and notes.txt named", skipped)
	}
	if rq := in.Scenario.Required["main"]; !rq.Strict || len(rq.Contexts) != 1 || len(in.Scenario.Behind) != 1 {
		t.Fatalf("scenario = %+v", in.Scenario)
	}
	if in.Files[0] != filepath.Join(dir, "000001-status-a.json") {
		t.Fatalf("files = %v", in.Files)
	}

	// --strict: the first file that is not a delivery stops the load.
	_, _, err = Load([]string{dir}, true)
	var bad *BadInputError
	if !errors.As(err, &bad) || !strings.HasSuffix(bad.File, "README.md") {
		t.Fatalf("strict: err = %v, want README.md named", err)
	}

	// Files given one by one keep the order given.
	in, _, err = Load([]string{filepath.Join(dir, "000002-status-b.json"), filepath.Join(dir, "000001-status-a.json")}, true)
	if err != nil || in.Deliveries[0].Delivery != "b" {
		t.Fatalf("explicit order: %+v, %v", in.Deliveries, err)
	}
	// A path that does not exist is an error, strict or not.
	if _, _, err := Load([]string{filepath.Join(dir, "missing")}, false); err == nil {
		t.Fatal("a missing path was accepted")
	}
}

func TestReadScenarioRefusesTypos(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ content, want string }{
		{`{"requried": {}}`, `unknown field "requried"`},
		{`{"behind": [0]}`, "not a pull request number"},
		{`not json`, "not a scenario"},
	} {
		path := writeFile(t, filepath.Join(dir, ScenarioFile), c.content)
		_, err := ReadScenario(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want %q and the file named", c.content, err, c.want)
		}
		if _, _, err := Load([]string{dir}, false); err == nil {
			t.Errorf("%s: Load accepted a bad scenario", c.content)
		}
	}
}

// Deliveries mergegate refuses, and payloads that make no sense, never
// panic an offline replay: refused ones are named on Warn (or stop the
// replay with Strict), odd ones are applied as mergegate applies them.
func TestReplayOfflineOddInput(t *testing.T) {
	inst := `"installation": {"id": 7}, "repository": {"full_name": "o/r"}`
	recs := []app.Recorded{
		{Event: "push", Delivery: "no-installation", Payload: json.RawMessage(`{"ref": "refs/heads/main", "after": "` + sha2A + `", "repository": {"full_name": "o/r"}}`)},
		{Event: "ping", Delivery: "ping", Payload: json.RawMessage(`{"zen": "Design for failure.", "hook_id": 1}`)},
		{Event: "pull_request", Delivery: "not-json", Payload: json.RawMessage(`{"action": `)},
		{Event: "pull_request", Delivery: "no-number", Payload: json.RawMessage(`{"action": "labeled", "pull_request": {}, ` + inst + `}`)},
		{Event: "pull_request", Delivery: "wrong-types", Payload: json.RawMessage(`{"action": "labeled", "pull_request": {"number": "five"}, ` + inst + `}`)},
		{Event: "check_run", Delivery: "no-sha", Payload: json.RawMessage(`{"action": "completed", "check_run": {"name": "ci"}, ` + inst + `}`)},
		{Event: "status", Delivery: "bad-time", Payload: json.RawMessage(`{"sha": "` + sha1A + `", "context": "ci", "state": "success", "updated_at": "yesterday", ` + inst + `}`)},
		{Event: "push", Delivery: "tag", Payload: json.RawMessage(`{"ref": "refs/tags/v1", "after": "` + sha2A + `", ` + inst + `}`)},
		{Event: "installation", Delivery: "install", Payload: json.RawMessage(`{"action": "created", "installation": {"id": 7}, "repositories": [{"full_name": "o/r"}, {"full_name": "not-a-repo"}]}`)},
		{Event: "merge_group", Delivery: "unknown-event", Payload: json.RawMessage(`{"action": "checks_requested", ` + inst + `}`)},
		{Event: "pull_request", Delivery: "eligible", Payload: json.RawMessage(`{"action": "labeled", "number": 3, "pull_request": {"number": 3, "state": "open", "labels": [{"name": "automerge"}], "head": {"sha": "` + sha3A + `"}, "base": {"ref": "main"}}, ` + inst + `}`)},
	}
	var warn bytes.Buffer
	out, err := Offline(context.Background(), recs, Options{Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"delivery 1 (no-installation): refused (400)", "delivery 3 (not-json): refused (400)",
		"delivery no-number (pull_request): failed", "delivery no-sha (check_run): failed", "wrong-types"} {
		if !strings.Contains(warn.String(), want) {
			t.Errorf("warnings lack %q:\n%s", want, warn.String())
		}
	}
	var st State
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	// o/r, and not-a-repo that the installation delivery named: mergegate
	// tracks what GitHub says it may see.
	if len(st.Repos) != 2 || st.Repos[0].Repo != "not-a-repo" || st.Repos[1].Repo != "o/r" ||
		len(st.Repos[1].Queue) != 1 || st.Repos[1].Queue[0].PRNumber != 3 {
		t.Fatalf("state = %s", out)
	}

	// Strict: the first refused delivery stops the replay, named.
	_, err = Offline(context.Background(), recs, Options{Strict: true, Files: []string{"rec/000001-push.json"}})
	if err == nil || !strings.Contains(err.Error(), "rec/000001-push.json") || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("strict: err = %v", err)
	}

	// Nothing to replay is an empty state, not an error.
	out, err = Offline(context.Background(), nil, Options{})
	if err != nil || string(out) != "{\n  \"repos\": []\n}\n" {
		t.Fatalf("empty replay: %q, %v", out, err)
	}
	if _, err := Offline(context.Background(), nil, Options{MergeMethod: "octopus"}); err == nil {
		t.Fatal("merge method octopus accepted")
	}
}

// The world built from payloads: what GitHub says about a PR, a check, a
// status, a push, and the clock taken from the payloads.
func TestReplayWorldFromPayloads(t *testing.T) {
	if got := payloadTime("status", []byte(`{"created_at": "2019-05-15T15:20:55+00:00", "updated_at": "2019-05-15T15:21:55+00:00"}`)); got.Format("15:04:05") != "15:21:55" {
		t.Fatalf("status time = %s", got)
	}
	if got := payloadTime("push", []byte(`{"repository": {"pushed_at": 1557933657}}`)); got.Unix() != 1557933657 {
		t.Fatalf("push time = %s", got)
	}
	if got := payloadTime("ping", []byte(`{}`)); !got.IsZero() {
		t.Fatalf("ping time = %s", got)
	}

	// Scenario "behind" and "required": strict protection and a PR behind
	// from the start; mergegate updates its branch before merging.
	pr := func(id, at string) app.Recorded {
		return app.Recorded{Event: "pull_request", Delivery: id, Payload: json.RawMessage(`{"action": "labeled", "number": 2,
			"pull_request": {"number": 2, "state": "open", "updated_at": "` + at + `", "labels": [{"name": "automerge"}], "head": {"sha": "` + sha2A + `"}, "base": {"ref": "main"}},
			"repository": {"full_name": "o/r", "default_branch": "main"}, "installation": {"id": 7}}`)}
	}
	check := app.Recorded{Event: "check_run", Delivery: "c", Payload: json.RawMessage(`{"action": "completed",
		"check_run": {"name": "ci", "head_sha": "` + sha2A + `", "status": "completed", "conclusion": "success", "completed_at": "2020-01-01T00:00:30Z", "app": {"id": 1, "slug": "ci"}},
		"repository": {"full_name": "o/r"}, "installation": {"id": 7}}`)}
	// mergegate's own check run, failed, must not count.
	own := app.Recorded{Event: "check_run", Delivery: "own", Payload: json.RawMessage(`{"action": "completed",
		"check_run": {"name": "mergegate", "head_sha": "` + sha2A + `", "status": "completed", "conclusion": "failure", "app": {"id": 99, "slug": "my-queue"}},
		"repository": {"full_name": "o/r"}, "installation": {"id": 7}}`)}
	out, err := Offline(context.Background(), []app.Recorded{pr("p", "2020-01-01T00:00:00Z"), own, check}, Options{
		Scenario: Scenario{Required: map[string]ScenarioRequired{"main": {Contexts: []string{"ci"}, Strict: true}}, Behind: []int{2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var st State
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatal(err)
	}
	rs := st.Repos[0]
	if len(rs.BranchUpdates) != 1 || rs.BranchUpdates[0].PRNumber != 2 || len(rs.Merges) != 0 {
		t.Fatalf("want one branch update and no merge yet:\n%s", out)
	}
	// The clock: the PR at its updated_at, the own check 1 s later (no
	// time in its payload), the check at its completed_at.
	if rs.Audit[0].TS != 1577836800000 || rs.Audit[len(rs.Audit)-1].TS != 1577836830000 {
		t.Fatalf("audit times: %+v", rs.Audit)
	}
}
