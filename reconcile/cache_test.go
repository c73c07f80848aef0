package reconcile

import (
	"strconv"
	"testing"
	"time"
)

// The Syncer's caches stay within maxCached entries however many keys
// come (a permission per commenter): expired entries go first, then any.
func TestCachesAreBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		olderHalf time.Duration // age of the first half of the entries when the new one comes
		wantLen   int
	}{
		{"all fresh: one goes", 0, maxCached},
		{"half expired: they go", time.Hour, maxCached/2 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]cached[int]{}
			for i := range maxCached {
				at := t0
				if i < maxCached/2 {
					at = t0.Add(-tc.olderHalf)
				}
				m[strconv.Itoa(i)] = cached[int]{v: i, at: at}
			}
			keep(m, "new", cached[int]{v: -1, at: t0}, 10*time.Minute)
			if len(m) != tc.wantLen || m["new"].v != -1 {
				t.Errorf("after one more: %d entries (want %d), new kept: %v", len(m), tc.wantLen, m["new"].v == -1)
			}
			keep(m, "new", cached[int]{v: -2, at: t0}, 10*time.Minute)
			if len(m) != tc.wantLen || m["new"].v != -2 {
				t.Errorf("a key already kept is replaced in place: %d entries, %v", len(m), m["new"].v)
			}
		})
	}
}
