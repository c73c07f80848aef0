package app

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// TestHealthProbesTheDatabasesFilesystem: a read-only database file or a
// filesystem with less room than one delivery is reported 503 with the
// reason, before any write had to fail.
func TestHealthProbesTheDatabasesFilesystem(t *testing.T) {
	store := testkit.Store(t, leasedo.Config{})
	for _, c := range []struct {
		name     string
		free     uint64
		writable error
		status   int
		reason   string
	}{
		{"room and writable", 10 << 30, nil, 200, ""},
		{"read-only filesystem", 10 << 30, syscall.EROFS, 503, "not writable: read-only file system"},
		{"disk almost full", 1 << 20, nil, 503, "1024 KiB free"},
		{"free space unknown", 0, nil, 200, ""},
	} {
		h := &health{store: store,
			free: func(string) (uint64, error) {
				if c.free == 0 {
					return 0, errors.New("unknown")
				}
				return c.free, nil
			},
			writable: func(string) error { return c.writable },
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.reason) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, w.Code, w.Body, c.status, c.reason)
		}
		// The public listener's answer: the status alone (issue 30, hole 8:
		// it gave the database's user, host and port).
		h.public = true
		w = httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		want := `{"status":"ok"}`
		if c.status != 200 {
			want = `{"status":"unavailable"}`
		}
		if w.Code != c.status || strings.Join(strings.Fields(w.Body.String()), "") != want {
			t.Errorf("%s, public: %d %s, want %d %s", c.name, w.Code, w.Body, c.status, want)
		}
	}
	// The real probes on this test's own folder.
	w := httptest.NewRecorder()
	healthz(store)(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if w.Code != 200 {
		t.Fatalf("healthz on a writable temporary folder: %d %s", w.Code, w.Body)
	}
}
