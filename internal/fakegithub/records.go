package fakegithub

import (
	"net/http"
	"slices"
)

// Records carry JSON names in the style of offline replay's output (docs/replay.md).

// Merge is a successful merge.
type Merge struct {
	Repo           string `json:"repo"`
	PRNumber       int    `json:"prNumber"`
	SHA            string `json:"sha"`    // the head that was merged (the sha guard)
	Method         string `json:"method"` // merge, squash or rebase
	MergeCommitSHA string `json:"mergeCommitSha"`
	// Title and Message are the commit_title and commit_message asked
	// for ("" when GitHub's own were left).
	Title   string `json:"title,omitempty"`
	Message string `json:"message,omitempty"`
	// Seq orders merges and check-run writes among each other.
	Seq int64 `json:"-"`
}

// BranchUpdate is a successful update-branch (REST, Method merge) or
// GraphQL updatePullRequestBranch (Method merge or rebase).
type BranchUpdate struct {
	Repo     string `json:"repo"`
	PRNumber int    `json:"prNumber"`
	FromSHA  string `json:"fromSha"`
	ToSHA    string `json:"toSha"`
	Method   string `json:"method"` // "merge" or "rebase"
}

// Comment is a comment posted on a PR.
type Comment struct {
	Repo     string `json:"repo"`
	PRNumber int    `json:"prNumber"`
	Body     string `json:"body"`
	// User and ID are set for comments written by people (AddComment).
	User string `json:"user,omitempty"`
	ID   int64  `json:"id,omitempty"`
}

// LabelRemoval is a label removed from a PR.
type LabelRemoval struct {
	Repo     string `json:"repo"`
	PRNumber int    `json:"prNumber"`
	Label    string `json:"label"`
}

// CheckRunWrite is a check run created or updated through the API.
type CheckRunWrite struct {
	Action     string // "created" or "updated"
	Repo       string
	ID         int64
	HeadSHA    string
	Name       string
	Status     string
	Conclusion string
	Title      string
	Summary    string
	Seq        int64 // orders merges and check-run writes among each other
}

// Call is one request the server answered.
type Call struct {
	Method      string
	Route       string // a Route* constant; "" when no route matched
	Path        string
	Tenant      string
	Status      int  // 0 when the request hung until the client gave up
	NotModified bool // answered 304 (free of rate-limit cost)
	Fault       bool // answered by an injected fault
}

type records struct {
	seq           int64
	tokens        int
	calls         []Call
	merges        []Merge
	updates       []BranchUpdate
	comments      []Comment
	labelsRemoved []LabelRemoval
	checkRuns     []CheckRunWrite
	reactions     []Reaction
	userComments  []Comment // AddComment
	deletedRefs   []string  // owner/name:branch
	refWrites     []RefWrite
}

// record appends a call. Called with s.mu held.
func (s *Server) record(r *http.Request, route, tenant string, status int, notModified, fault bool) {
	s.rec.calls = append(s.rec.calls, Call{
		Method: r.Method, Route: route, Path: r.URL.Path, Tenant: tenant,
		Status: status, NotModified: notModified, Fault: fault,
	})
}

// Calls returns every request answered so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.calls)
}

// CallCount returns how many requests route answered (all statuses).
func (s *Server) CallCount(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.rec.calls {
		if c.Route == route {
			n++
		}
	}
	return n
}

// CallCounts returns the number of calls per route.
func (s *Server) CallCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, c := range s.rec.calls {
		out[c.Route]++
	}
	return out
}

// ResetCalls forgets the recorded calls (not the other records).
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rec.calls = nil
}

// Merges returns the successful merges, in order.
func (s *Server) Merges() []Merge {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.merges)
}

// BranchUpdates returns the successful branch updates, in order.
func (s *Server) BranchUpdates() []BranchUpdate {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.updates)
}

// Comments returns the comments posted, in order.
func (s *Server) Comments() []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.comments)
}

// LabelsRemoved returns the labels removed, in order.
func (s *Server) LabelsRemoved() []LabelRemoval {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.labelsRemoved)
}

// CheckRuns returns the check runs created and updated through the API, in
// order (one entry per write).
func (s *Server) CheckRuns() []CheckRunWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.checkRuns)
}

// nextSeq numbers a merge or a check-run write, in the order they happen.
func (r *records) nextSeq() int64 {
	r.seq++
	return r.seq
}
