package app

import (
	"net/http"

	"github.com/mergegate/mergegate/leasedo"
)

// NewDashboard serves GET / on the admin listener.
func NewDashboard(s *leasedo.Store, m *Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		repos, err := s.Tracked(r.Context())
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal error; see the server log"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"repos": repos})
	})
	return mux
}
