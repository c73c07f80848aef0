package fakegithub_test

import (
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// Every request but GET and HEAD is recorded as a mutation, with its
// repository, the replica its User-Agent names, its status and its time in
// flight; reads are not.
func TestMutationsRecordWritesWithRepoReplicaAndTime(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	s.AddPR("o/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	c := newClient(t, s) // POST .../access_tokens: a mutation outside any repository
	before := time.Now()
	s.SetLatency(20 * time.Millisecond)
	if st, _ := c.get("repos/o/r/pulls/1"); st != 200 {
		t.Fatalf("get: %d", st)
	}
	st, _, _ := c.do("POST", "repos/o/r/check-runs", "token "+c.token, map[string]string{"name": "mergegate", "head_sha": "a"},
		map[string]string{"User-Agent": "mergegate (replica r-2)"})
	if st != 201 {
		t.Fatalf("create check run: %d", st)
	}
	c.do("PUT", "repos/o/r/pulls/9/merge", "token "+c.token, map[string]string{"sha": "a"}, map[string]string{"User-Agent": "curl"})
	after := time.Now()

	m := s.Mutations()
	if len(m) != 3 {
		t.Fatalf("mutations = %+v, want the token, the check run and the merge", m)
	}
	if m[0].Route != fakegithub.RouteCreateToken || m[0].Repo != "" || m[0].Status != 201 {
		t.Errorf("token request: %+v", m[0])
	}
	cr := m[1]
	if cr.Method != "POST" || cr.Route != fakegithub.RouteCreateCheckRun || cr.Repo != "o/r" || cr.Replica != "r-2" ||
		cr.UserAgent != "mergegate (replica r-2)" || cr.Status != 201 {
		t.Errorf("check run: %+v", cr)
	}
	if cr.Start.Before(before) || cr.End.Sub(cr.Start) < 20*time.Millisecond || cr.End.After(after) {
		t.Errorf("check run in flight %v..%v, want within %v..%v and at least the 20ms latency", cr.Start, cr.End, before, after)
	}
	if mg := m[2]; mg.Route != fakegithub.RouteMerge || mg.Repo != "o/r" || mg.Replica != "" || mg.Status != 404 {
		t.Errorf("merge of a missing PR: %+v", mg)
	}
	if !m[1].End.Before(m[2].Start) && !m[1].End.Equal(m[2].Start) {
		t.Errorf("sequential requests overlap: %v..%v and %v..%v", m[1].Start, m[1].End, m[2].Start, m[2].End)
	}
}

// InFlightOf lists a replica's requests being served.
func TestInFlightOfListsAReplicasRequests(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "o/r", "main")
	c := newClient(t, s)
	s.SetLatency(300 * time.Millisecond)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.do("GET", "repos/o/r/commits/a/status", "token "+c.token, nil, map[string]string{"User-Agent": "mergegate (replica r-1)"})
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(s.InFlightOf("r-1")) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := s.InFlightOf("r-1"); len(got) != 1 || got[0].Route != fakegithub.RouteCombinedStatus || got[0].Repo != "o/r" ||
		got[0].Path != "/repos/o/r/commits/a/status" || got[0].Method != "GET" {
		t.Errorf("r-1's requests in flight = %+v, want its status read", got)
	}
	if got := s.InFlightOf("r-2"); len(got) != 0 {
		t.Errorf("r-2's requests in flight = %+v, want none", got)
	}
	<-done
	if got := s.InFlightOf("r-1"); len(got) != 0 {
		t.Errorf("after the answer, r-1's requests in flight = %+v", got)
	}
	if m := s.Mutations(); len(m) != 1 || m[0].Route != fakegithub.RouteCreateToken {
		t.Errorf("a read recorded as a mutation: %+v", m)
	}
}

func TestReplicaOf(t *testing.T) {
	for ua, want := range map[string]string{
		"mergegate (replica web-1)":      "web-1",
		"mergegate (replica host-12345)": "host-12345",
		"mergegate":                      "",
		"mergegate (replica ":            "",
		"":                               "",
	} {
		if got := fakegithub.ReplicaOf(ua); got != want {
			t.Errorf("ReplicaOf(%q) = %q, want %q", ua, got, want)
		}
	}
}
