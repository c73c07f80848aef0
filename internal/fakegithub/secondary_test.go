package fakegithub_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The fake answers GitHub's secondary limits as GitHub documents them:
// the 81st content-generating request in a minute is refused 403 with
// retry-after (the minute frees it), the 501st in an hour without it;
// reads go on; refused requests count toward nothing.
func TestSecondaryLimitsOnWrites(t *testing.T) {
	s, c, clk := newGitServer(t)
	tok := "token " + c.token
	comment := func() (int, string, any) {
		code, h, body := c.do("POST", "repos/octo/r/issues/1/comments", tok, map[string]string{"body": "hi"}, nil)
		return code, h.Get("Retry-After"), body
	}
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	for i := 1; i <= fakegithub.SecondaryWritesPerMinute; i++ {
		if code, _, body := comment(); code != 201 {
			t.Fatalf("comment %d: %d %v", i, code, body)
		}
	}
	code, retry, body := comment()
	if code != 403 || retry != "60" || message(body) != fakegithub.MsgSecondaryContent {
		t.Fatalf("81st comment in a minute: %d retry-after %q %v; want 403, retry-after 60, GitHub's content-creation message", code, retry, body)
	}
	if code, _, _ := c.do("GET", "repos/octo/r/pulls/1", tok, nil, nil); code != 200 {
		t.Fatalf("a read while writes are limited: %d", code)
	}
	// Spread over the hour: 500 in all, then refused without retry-after.
	for sent := fakegithub.SecondaryWritesPerMinute; sent < fakegithub.SecondaryWritesPerHour; {
		clk.now = clk.now.Add(time.Minute)
		for i := 0; i < 70 && sent < fakegithub.SecondaryWritesPerHour; i++ {
			if code, _, body := comment(); code != 201 {
				t.Fatalf("comment %d: %d %v", sent+1, code, body)
			}
			sent++
		}
	}
	clk.now = clk.now.Add(time.Minute)
	if code, retry, _ := comment(); code != 403 || retry != "" {
		t.Fatalf("501st comment in an hour: %d retry-after %q; want 403 without retry-after", code, retry)
	}
	if n := s.SecondaryLimited(tenant); n != 2 {
		t.Errorf("SecondaryLimited = %d, want 2", n)
	}
	if got := s.PeakWrites(tenant, time.Minute); got != fakegithub.SecondaryWritesPerMinute {
		t.Errorf("PeakWrites(minute) = %d, want %d", got, fakegithub.SecondaryWritesPerMinute)
	}
	if got := s.PeakWrites(tenant, time.Hour); got != fakegithub.SecondaryWritesPerHour {
		t.Errorf("PeakWrites(hour) = %d, want %d", got, fakegithub.SecondaryWritesPerHour)
	}
}

// 900 points a minute per endpoint: 900 reads of one endpoint, then 403;
// another endpoint is not affected.
func TestSecondaryLimitPointsPerEndpoint(t *testing.T) {
	s, c, _ := newGitServer(t)
	tok := "token " + c.token
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	for i := 1; i <= fakegithub.SecondaryPointsPerMinute; i++ {
		if code, _, body := c.do("GET", fmt.Sprintf("repos/octo/r/pulls/1?i=%d", i), tok, nil, nil); code != 200 {
			t.Fatalf("read %d: %d %v", i, code, body)
		}
	}
	if code, h, _ := c.do("GET", "repos/octo/r/pulls/1", tok, nil, nil); code != 403 || h.Get("Retry-After") == "" {
		t.Fatalf("read 901 of one endpoint in a minute: %d, want 403 with retry-after", code)
	}
	if code, _, _ := c.do("GET", "repos/octo/r/pulls", tok, nil, nil); code != 200 {
		t.Fatalf("another endpoint: %d, want 200", code)
	}
}

// The GraphQL endpoint's secondary limit is 2,000 points a minute, a
// query 1 of them and a mutation 5: after one mutation, the 1,996th query
// in the minute is refused 403.
func TestSecondaryLimitGraphQLPoints(t *testing.T) {
	_, c, _ := newGitServer(t)
	send := func(q string) (int, any) {
		code, _, body := c.do("POST", "graphql", "token "+c.token, map[string]any{"query": q, "variables": map[string]any{"pullRequestId": "PR_none", "owner": "octo", "name": "r", "number": 1}}, nil)
		return code, body
	}
	const mutation = `mutation($pullRequestId: ID!) { updatePullRequestBranch(input: {pullRequestId: $pullRequestId}) { pullRequest { headRefOid } } }`
	const query = `query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { pullRequest(number: $number) { mergeQueueEntry { position } } } }`
	if code, body := send(mutation); code != 200 {
		t.Fatalf("mutation: %d %v", code, body)
	}
	for i := 1; i <= fakegithub.SecondaryGraphQLPoints-5; i++ {
		if code, body := send(query); code != 200 {
			t.Fatalf("query %d after a mutation: %d %v", i, code, body)
		}
	}
	if code, body := send(query); code != 403 || !strings.Contains(message(body), "secondary rate limit") {
		t.Fatalf("query %d after a mutation, in a minute: %d %v, want 403", fakegithub.SecondaryGraphQLPoints-4, code, body)
	}
}
