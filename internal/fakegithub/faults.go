package fakegithub

import (
	"net/http"
	"strconv"
	"time"
)

// Fault is an injected answer. Build one with the Fault* functions.
type Fault struct {
	Status  int               // answer status; 0 = serve normally after Delay
	Message string            // error body's message (default: status text)
	Header  map[string]string // extra headers, set after the rate headers
	Hang    bool              // never answer: wait until the client gives up
	Delay   time.Duration     // wait before answering
	// AfterServe performs the request (its effects happen) and then answers
	// Status instead of the real answer: a merge that happened behind a 502.
	AfterServe bool
}

// FaultStatus answers status with GitHub's error body {message}.
// Messages GitHub uses: 405 "Pull Request is not mergeable", 409 "Head
// branch was modified. Review and try the merge again.", 422 "Validation
// Failed", 502 "Server Error".
func FaultStatus(status int, message string) Fault {
	return Fault{Status: status, Message: message}
}

// FaultLostAnswer performs the request, then answers status (e.g. 502):
// the change happened, the client was not told.
func FaultLostAnswer(status int) Fault {
	return Fault{Status: status, AfterServe: true}
}

// FaultTimeout hangs until the client gives up (or the server closes).
func FaultTimeout() Fault { return Fault{Hang: true} }

// FaultDelay serves the request normally after d.
func FaultDelay(d time.Duration) Fault { return Fault{Delay: d} }

// FaultRetryAfter is a secondary rate limit: status (403 or 429) with
// retry-after in seconds.
func FaultRetryAfter(status, seconds int) Fault {
	return Fault{
		Status:  status,
		Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		Header:  map[string]string{"Retry-After": strconv.Itoa(seconds)},
	}
}

// FaultMissingPermission is GitHub's answer to a request the
// installation's permissions do not cover: 403 "Resource not accessible
// by integration", with X-Accepted-GitHub-Permissions naming what the
// endpoint needs (needs, e.g. "administration=read"; GitHub's list of
// permissions per endpoint).
func FaultMissingPermission(needs string) Fault {
	return Fault{
		Status:  http.StatusForbidden,
		Message: MsgNotAccessible,
		Header:  map[string]string{"X-Accepted-GitHub-Permissions": needs},
	}
}

// FaultUpdateLost is update-branch's 202 "Updating pull request branch."
// for an update that never comes: GitHub does the update after it
// answers, and this one's job did nothing (the fake's own update-branch
// updates within the request).
func FaultUpdateLost() Fault {
	return Fault{Status: http.StatusAccepted, Message: "Updating pull request branch."}
}

// FaultSecondary is a secondary rate limit without retry-after.
func FaultSecondary(status int) Fault {
	return Fault{Status: status, Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}
}

// FaultQuotaExhausted is the primary rate limit: 403 with
// x-ratelimit-remaining 0 and x-ratelimit-reset = reset.
func FaultQuotaExhausted(reset time.Time) Fault {
	return Fault{
		Status:  http.StatusForbidden,
		Message: "API rate limit exceeded for installation.",
		Header: map[string]string{
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     strconv.FormatInt(reset.Unix(), 10),
		},
	}
}

type faultRule struct {
	route string
	times int // < 0: forever
	fault Fault
}

// Fail makes the next times requests to route (a Route* constant, e.g.
// RouteMerge) answer with f; times < 0 means every request until
// ClearFaults. Faults apply after authentication, before the rate limit and
// the handler (a failed request changes nothing).
func (s *Server) Fail(route string, times int, f Fault) {
	if !knownRoute(route) {
		s.fatalf("fakegithub: Fail: unknown route %q (use a Route* constant)", route)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultRule{route: route, times: times, fault: f})
}

// FaultsLeft counts the faults still waiting for a request on route (a
// rule of times < 0 counts as one): 0 once a request took the last one,
// so a test knows that request is under way, its delay running.
func (s *Server) FaultsLeft(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, fr := range s.faults {
		if fr.route == route {
			n += max(fr.times, 1)
		}
	}
	return n
}

// ClearFaults removes every pending fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// takeFault consumes one matching fault. Called with s.mu held.
func (s *Server) takeFault(route string) *Fault {
	for i, fr := range s.faults {
		if fr.route != route || fr.times == 0 {
			continue
		}
		f := fr.fault
		if fr.times > 0 {
			fr.times--
			if fr.times == 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
		}
		return &f
	}
	return nil
}
