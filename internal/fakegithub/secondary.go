package fakegithub

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"
)

// GitHub's secondary rate limits, as "Rate limits for the REST API"
// documents them (and says they may change without notice): per
// installation, no more than 100 requests at once, 900 points a minute
// per REST endpoint (a read costs 1, a POST, PATCH, PUT or DELETE 5) and
// 2,000 a minute for the GraphQL endpoint (a query 1, a mutation 5), and
// no more than 80 content-generating requests a minute and 500 an hour.
// The fake enforces them by default, on its clock; a request over one is
// answered 403 "You have exceeded a secondary rate limit", with
// retry-after where a minute's window will free it and without where it
// will not (GitHub sends it only sometimes: a client must back off
// either way). A refused request counts toward nothing.
const (
	SecondaryConcurrent      = 100
	SecondaryPointsPerMinute = 900
	SecondaryGraphQLPoints   = 2000
	SecondaryWritesPerMinute = 80
	SecondaryWritesPerHour   = 500
)

// MsgSecondaryContent is GitHub's message past the content-generating
// requests' limits (80 a minute, 500 an hour), as a client met it
// (gofri/go-github-ratelimit#38): another message, "status" in the body.
const MsgSecondaryContent = "You have exceeded a secondary rate limit and have been temporarily blocked from content creation. Please retry your request again later."

const secondaryMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. " +
	"If you reach out to GitHub Support for help, please include the request ID 8E02:3F3A:1C8E2A7:3A1B8C4:6750A1B2."

const secondaryDocURL = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"

// secondaryState is the fake's record of what the secondary limits count,
// guarded by Server.mu.
type secondaryState struct {
	off      bool
	writes   map[string][]time.Time // tenant -> every content-generating request served
	points   map[string][]stamp     // tenant route -> points in the last minute
	answered map[string]int         // tenant -> 403s for a secondary limit
}

type stamp struct {
	at     time.Time
	points int
}

// SetSecondaryLimits turns the secondary limits on (the default) or off.
func (s *Server) SetSecondaryLimits(on bool) {
	s.mu.Lock()
	s.sec.off = !on
	s.mu.Unlock()
}

// SecondaryLimited is how many requests of tenant ("": of every
// installation) the fake answered with a secondary rate limit of its own
// (injected faults not counted).
func (s *Server) SecondaryLimited(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tenant != "" {
		return s.sec.answered[tenant]
	}
	n := 0
	for _, c := range s.sec.answered {
		n += c
	}
	return n
}

// PeakWrites is the most content-generating requests of tenant served in
// any window of length span (a minute, an hour), on the fake's clock.
func (s *Server) PeakWrites(tenant string, span time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.sec.writes[tenant]
	peak, lo := 0, 0
	for hi := range w {
		for !w[hi].Before(w[lo].Add(span)) {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

// Writes is how many content-generating requests of tenant were served.
func (s *Server) Writes(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sec.writes[tenant])
}

// contentGenerating: a POST, PATCH, PUT or DELETE other than the
// installation token's, or a GraphQL mutation.
func contentGenerating(r *http.Request, route string) bool {
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions:
		return false
	case route == RouteCreateToken:
		return false
	case route == RouteGraphQL:
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		return bytes.Contains(body, []byte("mutation"))
	}
	return true
}

// secondaryLimit decides, with s.mu held, whether tenant's request over
// route is over a secondary limit (content: one of the content-generating
// requests' limits); if not, it counts it. busy is the tenant's requests
// in flight, this one included.
func (s *Server) secondaryLimit(r *http.Request, route, tenant string, busy int) (retryAfter time.Duration, content, limited bool) {
	if s.sec.off || tenant == "" || route == RouteCreateToken {
		return 0, false, false
	}
	if s.sec.writes == nil {
		s.sec.writes, s.sec.points, s.sec.answered = map[string][]time.Time{}, map[string][]stamp{}, map[string]int{}
	}
	now := s.clock()
	write := contentGenerating(r, route)
	points := 1
	if write {
		points = 5 // a REST write or a GraphQL mutation ("Calculating points for the secondary rate limit")
	}
	key := tenant + " " + route
	ps := s.sec.points[key]
	for len(ps) > 0 && !now.Before(ps[0].at.Add(time.Minute)) {
		ps = ps[1:]
	}
	s.sec.points[key] = ps
	used := 0
	for _, p := range ps {
		used += p.points
	}
	refuse := func(after time.Duration, content bool) (time.Duration, bool, bool) {
		s.sec.answered[tenant]++
		return after, content, true
	}
	switch {
	case busy > SecondaryConcurrent:
		return refuse(0, false)
	case used+points > pointsPerMinute(route):
		return refuse(ps[0].at.Add(time.Minute).Sub(now), false)
	}
	if write {
		w := s.sec.writes[tenant]
		inMinute, inHour := 0, 0
		var oldestMinute time.Time
		for i := len(w) - 1; i >= 0 && now.Before(w[i].Add(time.Hour)); i-- {
			inHour++
			if now.Before(w[i].Add(time.Minute)) {
				inMinute++
				oldestMinute = w[i]
			}
		}
		switch {
		case inHour >= SecondaryWritesPerHour:
			return refuse(0, true)
		case inMinute >= SecondaryWritesPerMinute:
			return refuse(oldestMinute.Add(time.Minute).Sub(now), true)
		}
		s.sec.writes[tenant] = append(w, now)
	}
	s.sec.points[key] = append(ps, stamp{at: now, points: points})
	return 0, false, false
}

// writeSecondary answers a secondary rate limit as GitHub does (content:
// a content-generating requests' limit, in its own words).
func writeSecondary(w http.ResponseWriter, retryAfter time.Duration, content bool) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((retryAfter+time.Second-1)/time.Second)))
	}
	if content {
		writeJSON(w, http.StatusForbidden, map[string]string{"message": MsgSecondaryContent, "documentation_url": secondaryDocURL, "status": "403"})
		return
	}
	writeJSON(w, http.StatusForbidden, map[string]string{"message": secondaryMessage, "documentation_url": secondaryDocURL})
}

// pointsPerMinute is route's secondary limit in points a minute.
func pointsPerMinute(route string) int {
	if route == RouteGraphQL {
		return SecondaryGraphQLPoints
	}
	return SecondaryPointsPerMinute
}
