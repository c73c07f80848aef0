package forge

import (
	"container/list"
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultInstallationConcurrency is how many requests one installation has
// in flight at most, by default (Config.InstallationConcurrency).
const DefaultInstallationConcurrency = 4

// inflight is the outermost RoundTripper below ghinstallation: it bounds
// the requests one installation has in flight, every user of the Client
// together (the engine's merges and check runs, the cron's listings, token
// refreshes). GitHub's guidance against secondary rate limits is to send a
// token's requests one after the other rather than concurrently; the
// engine runs one goroutine per active repository, so a burst of check
// results across an organisation's repositories would otherwise send as
// many requests at once, and the secondary limit that answers blocks the
// whole installation for a minute or more.
//
// A request waits for a slot first (for its context, without a time
// limit: waiting is not failing), then checks the rate limit (rateGuard,
// below) and gets its Timeout from then on. The slot is held until the
// response body is read to its end or closed, so a large page being read
// still counts as in flight. Waiters are served in arrival order.
//
// The number of slots can change while requests are in flight
// (Client.SetReplicas: replicas on one database share an installation's
// bound): fewer, and the requests in flight finish while no waiter is let
// in until the count is below the new bound; more, and the first waiters
// go at once.
type inflight struct {
	slots   *slots
	budget  *writeBudget // content-generating requests (budget.go); nil: none
	timeout time.Duration
	slow    time.Duration // the timeout of slowOps
	next    http.RoundTripper

	waited atomic.Int64 // requests that found every slot taken
	waitNS atomic.Int64 // their time waiting, in all (wall clock: for the operator, decides nothing)
}

func newInflight(per int, timeout, slow time.Duration, next http.RoundTripper) *inflight {
	if per <= 0 {
		per = DefaultInstallationConcurrency
	}
	return &inflight{slots: newSlots(per), timeout: timeout, slow: max(slow, timeout), next: next}
}

// slots is a counting semaphore of adjustable size whose waiters are
// served in arrival order.
type slots struct {
	mu      sync.Mutex
	limit   int
	used    int
	waiters list.List // of chan struct{}, closed when granted
}

func newSlots(n int) *slots { return &slots{limit: max(n, 1)} }

// tryAcquire takes a slot if one is free and nobody waits for one.
func (s *slots) tryAcquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.used < s.limit && s.waiters.Len() == 0 {
		s.used++
		return true
	}
	return false
}

// acquire waits for a slot, in arrival order, or for ctx.
func (s *slots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.used < s.limit && s.waiters.Len() == 0 {
		s.used++
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	el := s.waiters.PushBack(ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-ch: // granted meanwhile: pass it on
		s.used--
		s.grantLocked()
	default:
		s.waiters.Remove(el)
	}
	s.mu.Unlock()
	return ctx.Err()
}

func (s *slots) release() {
	s.mu.Lock()
	s.used--
	s.grantLocked()
	s.mu.Unlock()
}

// setLimit changes the number of slots (at least 1).
func (s *slots) setLimit(n int) {
	s.mu.Lock()
	s.limit = max(n, 1)
	s.grantLocked()
	s.mu.Unlock()
}

func (s *slots) grantLocked() {
	for s.used < s.limit && s.waiters.Len() > 0 {
		close(s.waiters.Remove(s.waiters.Front()).(chan struct{}))
		s.used++
	}
}

// slowOps are the operations timed by Config.MergeTimeout: GitHub may take
// longer than its own 10 s on them and still do them, so giving up early
// invites sending them twice.
var slowOps = map[string]bool{"pulls.merge": true, "pulls.update-branch": true, "graphql.update-pull-request-branch": true,
	"repos.merge": true, "git.update-ref": true}

type sendCheckKey struct{}

// notSentError is a send check's refusal: the request was not sent, and
// no answer of GitHub's is to be read into it (it is not transient).
type notSentError struct{ err error }

func (e *notSentError) Error() string { return "not sent: " + e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }

// WithSendCheck returns ctx carrying check, which each request made with
// it runs right before it is sent, once it holds one of its installation's
// slots: an error is returned instead of sending. Checked there, a budget
// (the cron's rate-limit floor) can be overshot only by the requests
// already in flight, which the slots bound. A check already in ctx stays:
// it runs first, and the request is sent only when both pass.
func WithSendCheck(ctx context.Context, check func() error) context.Context {
	if prev, ok := ctx.Value(sendCheckKey{}).(func() error); ok {
		next := check
		check = func() error {
			if err := prev(); err != nil {
				return err
			}
			return next()
		}
	}
	return context.WithValue(ctx, sendCheckKey{}, check)
}

func (t *inflight) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if op := Operation(req); t.budget != nil && op != "apps.create-installation-access-token" {
		points := 1
		if _, write := writeClass(req); write {
			points = 5
		}
		if err := t.budget.spend(ctx, op, points); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	if !t.slots.tryAcquire() {
		start := time.Now()
		t.waited.Add(1)
		err := t.slots.acquire(ctx)
		t.waitNS.Add(int64(time.Since(start)))
		if err != nil {
			if req.Body != nil {
				req.Body.Close() // a RoundTripper closes the body, even on error
			}
			return nil, err
		}
	}
	if check, ok := ctx.Value(sendCheckKey{}).(func() error); ok {
		if err := check(); err != nil {
			t.slots.release()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, &notSentError{err}
		}
	}
	if cl, ok := writeClass(req); ok && t.budget != nil {
		if err := t.budget.take(cl); err != nil {
			t.slots.release()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, &notSentError{err}
		}
	}
	timeout := t.timeout
	if slowOps[Operation(req)] {
		timeout = t.slow
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		t.slots.release()
		return nil, err
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, release: sync.OnceFunc(func() {
		cancel()
		t.slots.release()
	})}
	return resp, nil
}

// slotBody gives its request's slot back when it is read to the end (or
// fails) or closed, whichever comes first: go-github's CheckResponse reads
// an error answer to the end and swaps the body for a copy, so the body it
// closes afterwards is not this one.
type slotBody struct {
	io.ReadCloser
	release func()
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
