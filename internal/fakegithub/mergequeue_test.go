package fakegithub_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
)

// webhookExample is one of GitHub's webhook payload examples (MIT, see
// testdata/github-webhooks/README.md).
func webhookExample(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github-webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The merge queue's deliveries have GitHub's shapes: merge_group's as
// GitHub's checks_requested example (the group's ref names the base and
// the pull request), pull_request's as the labeled example's, with the
// action and, for dequeued, the reason; in GitHub's order.
func TestMergeQueueDeliveriesShapes(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.SetMergeQueue("o/r", "main", true)
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a1"})
	s.AddPR("o/r", fakegithub.PR{Number: 2, HeadSHA: "b2"})
	var mu sync.Mutex
	type got struct {
		event string
		body  map[string]any
	}
	var gots []got
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Errorf("delivery is not JSON: %v", err)
		}
		mu.Lock()
		gots = append(gots, got{r.Header.Get("X-GitHub-Event"), m})
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer recv.Close()
	s.SetWebhook(recv.URL+"/webhook", "sekrit")
	c := newClient(t, s)
	const q = `mutation($pullRequestId: ID!, $expectedHeadOid: GitObjectID) { enqueuePullRequest(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid}) { mergeQueueEntry { position state mergeQueue { entries { totalCount } } } } }`
	for _, n := range []string{"1", "2"} {
		_, pr := c.get("repos/o/r/pulls/" + n)
		m := pr.(map[string]any)
		st, _, v := c.do("POST", "graphql", "token "+c.token, map[string]any{"query": q, "variables": map[string]any{
			"pullRequestId": m["node_id"], "expectedHeadOid": m["head"].(map[string]any)["sha"]}}, nil)
		if st != 200 || v.(map[string]any)["errors"] != nil {
			t.Fatalf("enqueue #%s: %d %v", n, st, v)
		}
		// The handler's deliveries go out after its answer, in order.
		testkit.Eventually(t, "the enqueue's deliveries", func() bool { return s.MergeQueueHooksInFlight() == 0 })
	}
	s.MergeQueueLand("o/r", "main")
	s.MergeQueueDequeue("o/r", 2, fakegithub.DequeueCIFailure)

	mu.Lock()
	defer mu.Unlock()
	var seq []string
	for _, g := range gots {
		seq = append(seq, g.event+" "+g.body["action"].(string))
	}
	want := []string{"pull_request enqueued", "merge_group checks_requested", "pull_request enqueued", "merge_group checks_requested",
		"merge_group destroyed", "pull_request closed", "merge_group destroyed", "pull_request dequeued"}
	if len(seq) != len(want) {
		t.Fatalf("deliveries %v, want %v", seq, want)
	}
	for i := range want {
		if seq[i] != want[i] {
			t.Fatalf("deliveries %v, want %v", seq, want)
		}
	}
	group := webhookExample(t, "merge_group/checks_requested.payload.json")
	labeled := webhookExample(t, "pull_request/labeled.payload.json")
	ref := regexp.MustCompile(`^refs/heads/gh-readonly-queue/main/pr-([0-9]+)-[0-9a-f]{40}$`)
	for i, g := range gots {
		switch g.event {
		case "merge_group":
			mg := g.body["merge_group"].(map[string]any)
			subShape(t, "merge_group", mg, group["merge_group"])
			if m := ref.FindStringSubmatch(mg["head_ref"].(string)); m == nil || mg["base_ref"] != "refs/heads/main" {
				t.Errorf("delivery %d: merge group refs %v %v", i, mg["head_ref"], mg["base_ref"])
			}
			if g.body["action"] == "destroyed" && g.body["reason"] == nil {
				t.Errorf("delivery %d: destroyed without a reason", i)
			}
		case "pull_request":
			subShape(t, "pull_request", g.body["pull_request"], labeled["pull_request"])
			if g.body["installation"] == nil || g.body["repository"] == nil {
				t.Errorf("delivery %d: no installation or repository", i)
			}
		}
	}
	if r := gots[7].body["reason"]; r != fakegithub.DequeueCIFailure {
		t.Errorf("dequeued reason %v, want %s", r, fakegithub.DequeueCIFailure)
	}
	if r := gots[4].body["reason"]; r != "merged" {
		t.Errorf("destroyed reason after the land %v, want merged", r)
	}
	if pr := gots[5].body["pull_request"].(map[string]any); pr["merged"] != true || pr["state"] != "closed" {
		t.Errorf("closed after the land: merged %v state %v", pr["merged"], pr["state"])
	}
}
