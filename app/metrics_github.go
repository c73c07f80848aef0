package app

import (
	"net/http"
	"strconv"

	"github.com/mergegate/mergegate/forge"
)

// githubTransport counts every HTTP request sent to GitHub (conditional
// GETs answered 304 included) by forge's operation name and HTTP status
// ("error": no answer). It sits at the bottom of forge's transport stack
// (forge.Config.Transport), so it sees what went on the wire.
func (m *Metrics) githubTransport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if m == nil {
		return next
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		status := "error"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.githubCalls.WithLabelValues(forge.Operation(req), status).Inc()
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
