package app

import (
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// minFreeBytes is the free space below which /healthz reports the
// database's filesystem as full: one GitHub-sized delivery (25 MiB) could
// not be stored.
const minFreeBytes = 25 << 20

// health answers GET /healthz: 200 {"status":"ok"} while mergegate can
// take deliveries, 503 {"status":"unavailable","error":...} when it cannot
// store them, so that a load balancer or systemd notices. On SQLite it
// never writes: it reads the outcome of the last write (a write refused
// for want of storage is reported until a write commits again), and
// probes the database's file and filesystem (writable, free space), which
// costs two system calls. On PostgreSQL it commits a tiny write, at most
// one every two seconds (leasedo.DB.ProbeWrite): a server down or
// unreachable, a read-only standby after a failover, a commit that hangs
// are each a 503.
//
// The public listener's /healthz says only "ok" or "unavailable" (the
// reason names the database's user, host and port, its file, the disk):
// the reason is on the admin listener's /healthz.
type health struct {
	store    *leasedo.Store
	free     func(dir string) (bytes uint64, err error)
	writable func(path string) error
	public   bool // no reason in the answer
}

func healthz(s *leasedo.Store) http.HandlerFunc {
	return (&health{store: s, free: freeBytes, writable: writable}).ServeHTTP
}

// publicHealthz is healthz without the reason.
func publicHealthz(s *leasedo.Store) http.HandlerFunc {
	return (&health{store: s, free: freeBytes, writable: writable, public: true}).ServeHTTP
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if reason := h.problem(r); reason != "" {
		answer := map[string]string{"status": "unavailable", "error": reason}
		if h.public {
			answer = map[string]string{"status": "unavailable"}
		}
		writeJSON(w, http.StatusServiceUnavailable, answer)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// problem is why deliveries cannot be stored now, or "".
func (h *health) problem(r *http.Request) string {
	db := h.store.DB()
	if db.Postgres() {
		if err := h.store.ProbeWrite(r.Context()); err != nil {
			return fmt.Sprintf("database cannot be written: %v; mergegate answers webhooks 503 until it can", err)
		}
		return ""
	}
	if err := db.Ping(r.Context()); err != nil {
		return "database does not answer"
	}
	if f := db.LastWriteFailure(); f != nil {
		return fmt.Sprintf("database cannot be written since %s: %v", f.At.UTC().Format(time.RFC3339), f.Err)
	}
	if err := h.writable(db.Path()); err != nil {
		return fmt.Sprintf("database file is not writable: %v", err)
	}
	if free, err := h.free(filepath.Dir(db.Path())); err == nil && free < minFreeBytes {
		return fmt.Sprintf("the filesystem holding the database has %d KiB free, less than one 25 MiB delivery", free>>10)
	}
	return ""
}
