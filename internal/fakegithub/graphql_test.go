package fakegithub_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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

// An installation's GraphQL quota is its own: 5,000 points an hour, a
// point a request here. Spent, GitHub answers 200 with an error of type
// RATE_LIMIT (code graphql_rate_limit) and its rate headers (resource
// graphql, remaining 0, the reset); the REST quota is not touched, and the
// hour's end gives the points back.
func TestGraphQLQuota(t *testing.T) {
	s, c, clk := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.SetGraphQLRateLimit(tenant, fakegithub.GraphQLPointsPerHour, 2)
	query := func() (int, http.Header, string) {
		t.Helper()
		st, h, v := c.do("POST", "graphql", "token "+c.token, map[string]any{
			"query":     `query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { mergeQueueEntry { position } } } }`,
			"variables": map[string]any{"owner": "octo", "name": "r", "number": 1}}, nil)
		b, _ := json.Marshal(v)
		return st, h, string(b)
	}
	for _, left := range []string{"1", "0"} {
		if st, h, body := query(); st != 200 || strings.Contains(body, "errors") || h.Get("X-Ratelimit-Remaining") != left || h.Get("X-Ratelimit-Resource") != "graphql" {
			t.Fatalf("a query with points left: %d remaining %q %s", st, h.Get("X-Ratelimit-Remaining"), body)
		}
	}
	st, h, body := query()
	want := `{"data":null,"errors":[{"code":"graphql_rate_limit","message":"` + fmt.Sprintf(fakegithub.MsgGraphQLRateLimited, tenant) + `","type":"RATE_LIMIT"}]}`
	if st != 200 || body != want || h.Get("X-Ratelimit-Remaining") != "0" || h.Get("X-Ratelimit-Reset") == "" {
		t.Fatalf("a query past the quota: %d %v %s, want 200 %s", st, h, body, want)
	}
	if code, h, _ := c.do("GET", "repos/octo/r/pulls/1", "token "+c.token, nil, nil); code != 200 || h.Get("X-Ratelimit-Resource") != "core" {
		t.Fatalf("a REST read with the GraphQL quota spent: %d %s", code, h.Get("X-Ratelimit-Resource"))
	}
	clk.now = clk.now.Add(time.Hour)
	c = newClient(t, s) // the token's hour is over too
	if st, h, body := query(); st != 200 || strings.Contains(body, "errors") || h.Get("X-Ratelimit-Remaining") != strconv.Itoa(fakegithub.GraphQLPointsPerHour-1) {
		t.Fatalf("a query in the next hour: %d remaining %q %s", st, h.Get("X-Ratelimit-Remaining"), body)
	}
}
