package fakegithub

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request is a request being served (InFlightOf), or the part of a
// Mutation it began with. Times are on the wall clock (not the server's
// Clock): several processes' requests are compared in real time.
type Request struct {
	Method string
	Route  string // a Route* constant; "" when no route matched
	Path   string
	// Repo is the owner/name the path names (/repos/{owner}/{repo}/...);
	// "" for requests outside a repository (tokens, GraphQL).
	Repo string
	// Replica is NAME from a User-Agent "... (replica NAME)", as mergegate
	// --replica sends it; "" when the agent names none.
	Replica   string
	UserAgent string
	Start     time.Time // when it arrived
}

// Mutation is one request that may change something (any method but GET
// and HEAD), from its arrival until its answer was written. Tests of
// several mergegate processes on one GitHub read them to see who changed
// a repository when, and whether two changes of one repository were ever
// in flight at once.
type Mutation struct {
	Request
	Status int // 0 when no answer was written (the client gave up)
	End    time.Time
}

type mutationLog struct {
	mu       sync.Mutex
	all      []Mutation
	next     int64
	inFlight map[int64]Request // every request (reads too) being served
}

// InFlightOf returns the requests (reads too) of replica (as its
// User-Agent names it, see ReplicaOf) being served right now, oldest
// first: a test that stops a replica can wait for a moment it is in the
// middle of a pass, say reading a commit's status before it decides what
// to do about it.
func (s *Server) InFlightOf(replica string) []Request {
	s.muts.mu.Lock()
	defer s.muts.mu.Unlock()
	var out []Request
	for _, r := range s.muts.inFlight {
		if r.Replica == replica {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b Request) int { return a.Start.Compare(b.Start) })
	return out
}

// Mutations returns every mutating request answered so far, in the order
// their answers were written.
func (s *Server) Mutations() []Mutation {
	s.muts.mu.Lock()
	defer s.muts.mu.Unlock()
	return slices.Clone(s.muts.all)
}

// track counts r in InFlightOf until done, deferred, is called; when r is
// a mutation the returned writer notes its status, and done records it.
func (s *Server) track(w http.ResponseWriter, r *http.Request, route string) (http.ResponseWriter, func()) {
	req := Request{Method: r.Method, Route: route, Path: r.URL.Path, Repo: repoOfPath(strings.TrimPrefix(r.URL.Path, s.prefix)),
		Replica: ReplicaOf(r.UserAgent()), UserAgent: r.UserAgent(), Start: time.Now()}
	s.muts.mu.Lock()
	if s.muts.inFlight == nil {
		s.muts.inFlight = map[int64]Request{}
	}
	s.muts.next++
	id := s.muts.next
	s.muts.inFlight[id] = req
	s.muts.mu.Unlock()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return w, func() {
			s.muts.mu.Lock()
			delete(s.muts.inFlight, id)
			s.muts.mu.Unlock()
		}
	}
	sw := &statusWriter{ResponseWriter: w}
	return sw, func() {
		m := Mutation{Request: req, Status: sw.status, End: time.Now()}
		s.muts.mu.Lock()
		delete(s.muts.inFlight, id)
		s.muts.all = append(s.muts.all, m)
		s.muts.mu.Unlock()
	}
}

// ReplicaOf reads NAME from a User-Agent "mergegate (replica NAME)"; "" when
// it names no replica.
func ReplicaOf(userAgent string) string {
	const tag = "(replica "
	i := strings.Index(userAgent, tag)
	if i < 0 {
		return ""
	}
	rest := userAgent[i+len(tag):]
	j := strings.IndexByte(rest, ')')
	if j < 0 {
		return ""
	}
	return rest[:j]
}

// repoOfPath is owner/name of a path /repos/{owner}/{repo}/..., else "".
func repoOfPath(p string) string {
	parts := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 4)
	if len(parts) < 3 || parts[0] != "repos" {
		return ""
	}
	return parts[1] + "/" + parts[2]
}

// statusWriter notes the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}
