package fakegithub_test

import (
	"encoding/json"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The GraphQL answers' shape: HTTP 200 with data, or with
// data.updatePullRequestBranch null and an errors array.
func TestGraphQLUpdatePullRequestBranchShape(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	s.SetBehind("o/r", 1, true)
	c := newClient(t, s)
	_, pr := c.get("repos/o/r/pulls/1")
	id := pr.(map[string]any)["node_id"].(string)
	send := func(head string) (int, string) {
		t.Helper()
		const q = `mutation($pullRequestId: ID!, $expectedHeadOid: GitObjectID) { updatePullRequestBranch(input: {pullRequestId: $pullRequestId, expectedHeadOid: $expectedHeadOid, updateMethod: REBASE}) { pullRequest { headRefOid } } }`
		st, _, v := c.do("POST", "graphql", "token "+c.token, map[string]any{"query": q, "variables": map[string]any{"pullRequestId": id, "expectedHeadOid": head}}, nil)
		b, _ := json.Marshal(v)
		return st, string(b)
	}
	st, body := send("wrong")
	if want := `{"data":{"updatePullRequestBranch":null},"errors":[{"message":"` + fakegithub.MsgGraphQLExpectedHeadOid + `","path":["updatePullRequestBranch"],"type":"UNPROCESSABLE"}]}`; st != 200 || body != want {
		t.Fatalf("wrong head: %d %s, want 200 %s", st, body, want)
	}
	st, body = send("a")
	ups := s.BranchUpdates()
	if len(ups) != 1 || ups[0].Method != "rebase" {
		t.Fatalf("updates %+v", ups)
	}
	if want := `{"data":{"updatePullRequestBranch":{"pullRequest":{"headRefOid":"` + ups[0].ToSHA + `"}}}}`; st != 200 || body != want {
		t.Fatalf("rebase: %d %s, want 200 %s", st, body, want)
	}
	st, body = send(ups[0].ToSHA)
	if want := `{"data":{"updatePullRequestBranch":null},"errors":[{"message":"` + fakegithub.MsgNoNewCommits + `","path":["updatePullRequestBranch"],"type":"UNPROCESSABLE"}]}`; st != 200 || body != want {
		t.Fatalf("not behind: %d %s, want 200 %s", st, body, want)
	}
	if n := s.CallCount(fakegithub.RouteGraphQL); n != 3 {
		t.Errorf("GraphQL calls = %d, want 3", n)
	}
}
