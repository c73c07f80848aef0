package fakegithub

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strconv"
	"time"
)

// GitHub's own merge queue, on a base whose ruleset has the merge_queue
// rule (SetMergeQueue): the GraphQL enqueuePullRequest mutation, a pull
// request's mergeQueueEntry, and helpers that play GitHub's part
// (MergeQueueLand, MergeQueueDequeue). With a webhook set (SetWebhook),
// GitHub's deliveries follow: pull_request enqueued, dequeued and closed,
// merge_group checks_requested and destroyed.

// GraphQL error messages of enqueuePullRequest. GitHub prefixes the
// record's validation messages with "Pull request " (its users quote
// "Pull request Required workflow '...' is not satisfied", "Pull request
// Waiting on code owner review from ...", "Pull request is already in the
// queue"); the words for a moved head and a base without a queue are not
// documented.
const (
	MsgEnqueueAlreadyQueued = "Pull request is already in the queue"
	MsgEnqueueNoQueue       = "No merge queue found for branch %s"
	MsgEnqueueConflict      = "Pull request has merge conflicts"
	MsgEnqueueDraft         = "Pull request is still a draft"
	MsgEnqueueClosed        = "Pull request is closed"
	MsgEnqueueForbidden     = MsgNotAccessible
)

// Reasons GitHub gives for removing a pull request from its merge queue
// (pull_request dequeued's reason, RemovedFromMergeQueueEvent.reason).
// GitHub documents the field as a string without listing its values;
// these are the fake's.
const (
	DequeueManual        = "MANUAL"
	DequeueCIFailure     = "CI_FAILURE"
	DequeueCITimeout     = "CI_TIMEOUT"
	DequeueMergeConflict = "MERGE_CONFLICT"
)

// mqEntry is one pull request in a base's merge queue.
type mqEntry struct {
	number     int
	headSHA    string
	baseSHA    string // the base the group was built on
	enqueuedAt time.Time
}

// mqEvent is a pull request's merge queue timeline item.
type mqEvent struct {
	added  bool
	reason string // removed: GitHub's reason
	at     time.Time
}

// mqState is the fake's merge queues. Guarded by Server.mu.
type mqState struct {
	queues    map[string][]*mqEntry // "owner/name@branch"
	events    map[string][]mqEvent  // "owner/name#n"
	enqueues  []Enqueue             // every enqueue taken, in order
	forbidden bool                  // SetEnqueueForbidden
	sending   int                   // deliveries the enqueue handler is sending
}

// mq returns s's merge queue state. Called with s.mu held.
func (s *Server) mq() *mqState {
	m := &s.mqs
	if m.queues == nil {
		m.queues, m.events = map[string][]*mqEntry{}, map[string][]mqEvent{}
	}
	return m
}

// SetEnqueueForbidden makes enqueuePullRequest answer FORBIDDEN, as GitHub
// does for an App that may not merge into the base.
func (s *Server) SetEnqueueForbidden(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mq().forbidden = on
}

// MergeQueue returns the numbers of the pull requests in branch's merge
// queue, first first.
func (s *Server) MergeQueue(fullName, branch string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, e := range s.mq().queues[fullName+"@"+branch] {
		out = append(out, e.number)
	}
	return out
}

// MergeQueueEnqueues returns each enqueuePullRequest GitHub took, in order:
// the pull request and the expectedHeadOid it was sent with.
func (s *Server) MergeQueueEnqueues() []Enqueue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Enqueue(nil), s.mq().enqueues...)
}

// Enqueue is one pull request GitHub's merge queue took.
type Enqueue struct {
	Repo            string
	PRNumber        int
	ExpectedHeadOid string
}

// MergeQueueHooksInFlight is how many deliveries an enqueuePullRequest is
// still sending (a test waits for 0 before it looks at what they did).
func (s *Server) MergeQueueHooksInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mq().sending
}

var (
	enqueueMutationRe = regexp.MustCompile(`\bmutation\b[\s\S]*\benqueuePullRequest\s*\(`)
	queueEntryQueryRe = regexp.MustCompile(`\bpullRequest\s*\([\s\S]*\bmergeQueueEntry\b`)
	queueQueryRe      = regexp.MustCompile(`\bmergeQueue\s*\(\s*branch\s*:`)
)

// gqlEnqueue serves enqueuePullRequest. Called with s.mu held.
func (s *Server) gqlEnqueue(w http.ResponseWriter, r *http.Request, vars map[string]any) {
	fail := func(typ, msg string) {
		writeJSON(w, http.StatusOK, obj{
			"data":   obj{"enqueuePullRequest": nil},
			"errors": []obj{{"type": typ, "path": []string{"enqueuePullRequest"}, "message": msg}},
		})
	}
	id, _ := vars["pullRequestId"].(string)
	expected, _ := vars["expectedHeadOid"].(string)
	rp, pr := s.prByNodeID(id, tenantOf(r))
	if pr == nil {
		fail("NOT_FOUND", fmt.Sprintf(MsgGraphQLNotFound, id))
		return
	}
	m := s.mq()
	key := rp.fullName + "@" + pr.BaseRef
	rules := rp.rulesOf(pr.BaseRef)
	switch {
	case m.forbidden:
		fail("FORBIDDEN", MsgEnqueueForbidden)
		return
	case !rules.mergeQueue:
		fail("UNPROCESSABLE", fmt.Sprintf(MsgEnqueueNoQueue, pr.BaseRef))
		return
	case pr.State != "open":
		fail("UNPROCESSABLE", MsgEnqueueClosed)
		return
	case expected != "" && expected != pr.HeadSHA:
		fail("UNPROCESSABLE", MsgGraphQLExpectedHeadOid)
		return
	case s.queuePos(key, pr.Number) > 0:
		fail("UNPROCESSABLE", MsgEnqueueAlreadyQueued)
		return
	case pr.Draft:
		fail("UNPROCESSABLE", MsgEnqueueDraft)
		return
	case pr.Unmergeable:
		fail("UNPROCESSABLE", MsgEnqueueConflict)
		return
	case rp.reviewProblem(pr) != "":
		fail("UNPROCESSABLE", "Pull request "+rp.reviewProblem(pr))
		return
	case rp.requiredProblem(pr) != "":
		fail("UNPROCESSABLE", "Pull request "+rp.requiredProblem(pr))
		return
	}
	now := s.now()
	e := &mqEntry{number: pr.Number, headSHA: pr.HeadSHA, baseSHA: rp.branches[pr.BaseRef], enqueuedAt: now}
	m.queues[key] = append(m.queues[key], e)
	pk := rp.fullName + "#" + strconv.Itoa(pr.Number)
	m.events[pk] = append(m.events[pk], mqEvent{added: true, at: now})
	m.enqueues = append(m.enqueues, Enqueue{Repo: rp.fullName, PRNumber: pr.Number, ExpectedHeadOid: expected})
	writeJSON(w, http.StatusOK, obj{"data": obj{"enqueuePullRequest": obj{"mergeQueueEntry": s.entryJSON(key, pr.Number)}}})
	// GitHub tells the App: the pull request is enqueued, and its group's
	// checks are requested.
	hooks := []hook{
		{"pull_request", s.prHookJSON(rp, pr, "enqueued", "")},
		{"merge_group", s.mergeGroupJSON(rp, pr.BaseRef, e, "checks_requested", "")},
	}
	if s.hooks.hookURL == "" {
		return
	}
	m.sending++
	go func() {
		for _, h := range hooks {
			s.SendWebhook(h.event, "", h.payload)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		m.sending--
	}()
}

type hook struct {
	event   string
	payload []byte
}

// queuePos is the pull request's 1-based place in the queue key, 0 when
// it is not in it. Called with s.mu held.
func (s *Server) queuePos(key string, number int) int {
	for i, e := range s.mq().queues[key] {
		if e.number == number {
			return i + 1
		}
	}
	return 0
}

// entryJSON is GraphQL's MergeQueueEntry (position, state, its queue's
// size), or nil. Called with s.mu held.
func (s *Server) entryJSON(key string, number int) any {
	pos := s.queuePos(key, number)
	if pos == 0 {
		return nil
	}
	state := "QUEUED"
	if pos == 1 {
		state = "AWAITING_CHECKS"
	}
	return obj{"position": pos, "state": state, "mergeQueue": obj{"entries": obj{"totalCount": len(s.mq().queues[key])}}}
}

// gqlQueueEntry serves repository(owner, name){ pullRequest(number){
// mergeQueueEntry{...} timelineItems(last: 1, itemTypes: [...]){...} } }.
// Called with s.mu held.
func (s *Server) gqlQueueEntry(w http.ResponseWriter, r *http.Request, vars map[string]any) {
	owner, _ := vars["owner"].(string)
	name, _ := vars["name"].(string)
	number, _ := vars["number"].(float64)
	rp := s.repos[owner+"/"+name]
	if rp == nil || rp.tenant != tenantOf(r) {
		writeJSON(w, http.StatusOK, obj{"data": obj{"repository": nil}, "errors": []obj{{"type": "NOT_FOUND", "path": []string{"repository"},
			"message": fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)}}})
		return
	}
	pr := rp.prs[int(number)]
	if pr == nil {
		writeJSON(w, http.StatusOK, obj{"data": obj{"repository": obj{"pullRequest": nil}}, "errors": []obj{{"type": "NOT_FOUND", "path": []string{"repository", "pullRequest"},
			"message": fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", int(number))}}})
		return
	}
	nodes := []obj{}
	if ev := s.mq().events[rp.fullName+"#"+strconv.Itoa(pr.Number)]; len(ev) > 0 {
		last := ev[len(ev)-1]
		if last.added {
			nodes = append(nodes, obj{"__typename": "AddedToMergeQueueEvent"})
		} else {
			nodes = append(nodes, obj{"__typename": "RemovedFromMergeQueueEvent", "createdAt": ts(last.at), "reason": last.reason})
		}
	}
	writeJSON(w, http.StatusOK, obj{"data": obj{"repository": obj{"pullRequest": obj{
		"mergeQueueEntry": s.entryJSON(rp.fullName+"@"+pr.BaseRef, pr.Number),
		"timelineItems":   obj{"nodes": nodes},
	}}}})
}

// MergeQueueLand plays GitHub's merge queue merging the first entry of
// branch's queue: the pull request is merged (closed, the base moves to
// its merge commit) and leaves the queue. With a webhook set, merge_group
// destroyed (reason merged) and pull_request closed are delivered. It
// returns the number merged, 0 when the queue is empty.
func (s *Server) MergeQueueLand(fullName, branch string) int {
	s.mu.Lock()
	rp := s.mustRepo(fullName)
	m := s.mq()
	key := fullName + "@" + branch
	if len(m.queues[key]) == 0 {
		s.mu.Unlock()
		return 0
	}
	e := m.queues[key][0]
	m.queues[key] = m.queues[key][1:]
	pr := rp.prs[e.number]
	now := s.now()
	commit := DeriveSHA(pr.HeadSHA, "merge_queue")
	pr.State, pr.Merged, pr.MergeCommitSHA = "closed", true, commit
	pr.MergedAt, pr.ClosedAt, pr.UpdatedAt = now, now, now
	s.moveBase(rp, branch, commit, pr)
	hooks := []hook{
		{"merge_group", s.mergeGroupJSON(rp, branch, e, "destroyed", "merged")},
		{"pull_request", s.prHookJSON(rp, pr, "closed", "")},
	}
	send := s.hooks.hookURL != ""
	s.mu.Unlock()
	if send {
		for _, h := range hooks {
			s.SendWebhook(h.event, "", h.payload)
		}
	}
	return e.number
}

// MergeQueueDequeue plays GitHub removing pull request number from its
// base's merge queue for reason (DequeueCIFailure, DequeueManual, ...).
// With a webhook set, merge_group destroyed (reason dequeued) and
// pull_request dequeued (with reason) are delivered. It reports whether the
// pull request was in the queue.
func (s *Server) MergeQueueDequeue(fullName string, number int, reason string) bool {
	s.mu.Lock()
	rp, pr := s.mustPR(fullName, number)
	m := s.mq()
	key := fullName + "@" + pr.BaseRef
	pos := s.queuePos(key, number)
	if pos == 0 {
		s.mu.Unlock()
		return false
	}
	e := m.queues[key][pos-1]
	m.queues[key] = append(m.queues[key][:pos-1:pos-1], m.queues[key][pos:]...)
	pk := fullName + "#" + strconv.Itoa(number)
	m.events[pk] = append(m.events[pk], mqEvent{reason: reason, at: s.now()})
	hooks := []hook{
		{"merge_group", s.mergeGroupJSON(rp, pr.BaseRef, e, "destroyed", "dequeued")},
		{"pull_request", s.prHookJSON(rp, pr, "dequeued", reason)},
	}
	send := s.hooks.hookURL != ""
	s.mu.Unlock()
	if send {
		for _, h := range hooks {
			s.SendWebhook(h.event, "", h.payload)
		}
	}
	return true
}

// installationJSON is a delivery's installation.
func installationJSON(rp *repo) obj {
	id, _ := strconv.ParseInt(rp.tenant, 10, 64)
	return obj{"id": id, "node_id": nodeID("MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9u", id)}
}

// prHookJSON is a pull_request delivery (reason: dequeued's). Called with
// s.mu held.
func (s *Server) prHookJSON(rp *repo, pr *PR, action, reason string) []byte {
	p := s.prJSON(rp, pr, true)
	for _, side := range []string{"head", "base"} {
		// A delivery's repositories carry no merge settings (GET does).
		if ref, ok := p[side].(obj); ok {
			if r, ok := ref["repo"].(obj); ok {
				r = maps.Clone(r)
				delete(r, "allow_merge_commit")
				delete(r, "allow_squash_merge")
				delete(r, "allow_rebase_merge")
				ref = maps.Clone(ref)
				ref["repo"] = r
				p[side] = ref
			}
		}
	}
	o := obj{
		"action": action, "number": pr.Number, "pull_request": p,
		"repository": s.repoJSON(rp, false), "installation": installationJSON(rp), "sender": s.userJSON("github-merge-queue[bot]"),
	}
	if action == "dequeued" {
		o["reason"] = reason
	}
	return marshal(o)
}

// mergeGroupJSON is a merge_group delivery as GitHub sends it: the group's
// ref is refs/heads/gh-readonly-queue/<base>/pr-<n>-<sha>. reason is
// destroyed's: merged, invalidated or dequeued. Called with s.mu held.
func (s *Server) mergeGroupJSON(rp *repo, branch string, e *mqEntry, action, reason string) []byte {
	head := DeriveSHA(e.baseSHA, e.headSHA, "merge_group")
	o := obj{
		"action": action,
		"merge_group": obj{
			"head_sha": head,
			"head_ref": fmt.Sprintf("refs/heads/gh-readonly-queue/%s/pr-%d-%s", branch, e.number, e.baseSHA),
			"base_sha": e.baseSHA,
			"base_ref": "refs/heads/" + branch,
			"head_commit": obj{
				"id": head, "tree_id": DeriveSHA(head, "tree"), "message": fmt.Sprintf("Merge pull request #%d", e.number),
				"timestamp": ts(e.enqueuedAt),
				"author":    obj{"name": "GitHub", "email": "noreply@github.com"},
				"committer": obj{"name": "GitHub", "email": "noreply@github.com"},
			},
		},
		"repository": s.repoJSON(rp, false), "installation": installationJSON(rp), "sender": s.userJSON("github-merge-queue[bot]"),
	}
	if action == "destroyed" {
		o["reason"] = reason
	}
	return marshal(o)
}

func marshal(o obj) []byte {
	b, err := json.Marshal(o)
	if err != nil {
		panic("fakegithub: " + err.Error())
	}
	return b
}

// gqlQueue serves repository(owner, name){ mergeQueue(branch){ entries{
// totalCount nodes{ position state pullRequest{ number } } } } }: null for
// a branch without a queue, as GitHub answers. Called with s.mu held.
func (s *Server) gqlQueue(w http.ResponseWriter, r *http.Request, vars map[string]any) {
	owner, _ := vars["owner"].(string)
	name, _ := vars["name"].(string)
	branch, _ := vars["branch"].(string)
	rp := s.repos[owner+"/"+name]
	if rp == nil || rp.tenant != tenantOf(r) {
		writeJSON(w, http.StatusOK, obj{"data": obj{"repository": nil}, "errors": []obj{{"type": "NOT_FOUND", "path": []string{"repository"},
			"message": fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, name)}}})
		return
	}
	var queue any
	if rp.rulesOf(branch).mergeQueue {
		key := rp.fullName + "@" + branch
		nodes := []obj{}
		for _, e := range s.mq().queues[key] {
			n := s.entryJSON(key, e.number).(obj)
			delete(n, "mergeQueue")
			n["pullRequest"] = obj{"number": e.number}
			nodes = append(nodes, n)
		}
		queue = obj{"entries": obj{"totalCount": len(nodes), "nodes": nodes}}
	}
	writeJSON(w, http.StatusOK, obj{"data": obj{"repository": obj{"mergeQueue": queue}}})
}
