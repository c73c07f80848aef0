package fakegithub

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Mutation is one request that may change something (any method but GET
// and HEAD), from its arrival until its answer was written, on the wall
// clock (not the server's Clock: several processes' requests are compared
// in real time). Tests of several mergegate processes on one GitHub read
// them to see who changed a repository when, and whether two changes of
// one repository were ever in flight at once.
type Mutation struct {
	Method string
	Route  string // a Route* constant; "" when no route matched
	Path   string
	// Repo is the owner/name the path names (/repos/{owner}/{repo}/...);
	// "" for requests outside a repository (tokens, GraphQL).
	Repo string
	// Replica is NAME from a User-Agent "... (replica NAME)", as mergegate
	// --replica sends it; "" when the agent names none.
	Replica    string
	UserAgent  string
	Status     int // 0 when no answer was written (the client gave up)
	Start, End time.Time
}

type mutationLog struct {
	mu       sync.Mutex
	all      []Mutation
	inFlight map[string]int // replica -> its requests (reads too) being served
}

// InFlightOf returns how many requests (reads too) of replica (as its
// User-Agent names it, see ReplicaOf) are being served right now: a test
// that stops a replica can wait for a moment it is in the middle of a
// pass.
func (s *Server) InFlightOf(replica string) int {
	s.muts.mu.Lock()
	defer s.muts.mu.Unlock()
	return s.muts.inFlight[replica]
}

// Mutations returns every mutating request answered so far, in the order
// their answers were written.
func (s *Server) Mutations() []Mutation {
	s.muts.mu.Lock()
	defer s.muts.mu.Unlock()
	return slices.Clone(s.muts.all)
}

// trackMutation starts the record of r when it is a mutation: the returned
// writer notes the status, and done, deferred, writes the record.
// It counts every request in InFlightOf meanwhile.
func (s *Server) trackMutation(w http.ResponseWriter, r *http.Request, route string) (http.ResponseWriter, func()) {
	replica := ReplicaOf(r.UserAgent())
	s.muts.mu.Lock()
	if s.muts.inFlight == nil {
		s.muts.inFlight = map[string]int{}
	}
	s.muts.inFlight[replica]++
	s.muts.mu.Unlock()
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return w, func() {
			s.muts.mu.Lock()
			s.muts.inFlight[replica]--
			s.muts.mu.Unlock()
		}
	}
	m := Mutation{Method: r.Method, Route: route, Path: r.URL.Path, Repo: repoOfPath(strings.TrimPrefix(r.URL.Path, s.prefix)),
		Replica: replica, UserAgent: r.UserAgent(), Start: time.Now()}
	sw := &statusWriter{ResponseWriter: w}
	return sw, func() {
		m.Status, m.End = sw.status, time.Now()
		s.muts.mu.Lock()
		s.muts.inFlight[replica]--
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
