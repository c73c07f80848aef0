package reconcile

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/lifecycle"
	"github.com/mergegate/mergegate/rules"
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

// What mergegate wrote of its own branches stands in for a read for
// readLag (GitHub's read may still show the branch as it was), no longer,
// and not when the clock went back; a landing holds the train's reading of
// its base for as long, not when it is stamped ahead of this clock.
func TestOwnWritesStandInForLaggingReads(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	gh.AddRepo("1", "o/r", "main") // no train branch there
	s := NewSyncer(SyncConfig{Clock: clk, Forge: testkit.Forge(t, gh, forge.Config{Clock: clk.Now})})
	k := leasedo.Key{Tenant: "1", Repo: "o/r"}
	const train = "mergegate/main/train"
	ctx := context.Background()
	for _, tc := range []struct {
		move time.Duration
		want string // "": read from GitHub, which has no such branch
	}{
		{0, "abc"},
		{readLag - time.Millisecond, "abc"},
		{readLag, ""},
		{-time.Hour, ""}, // the clock went back
	} {
		s.wroteBranch(k, train, "abc")
		clk.Set(clk.Now().Add(tc.move))
		tip, err := s.ownTip(ctx, k, train)
		if tip != tc.want || (tc.want == "") != errors.Is(err, forge.ErrNotFound) {
			t.Errorf("%s after the write: %q %v, want %q", tc.move, tip, err, tc.want)
		}
		clk.Set(clk.Now().Add(-tc.move))
	}
	s.wroteBranch(k, train, "")
	if n := gh.CallCount(fakegithub.RouteGetRef); n != 2 {
		t.Errorf("%d reads of the branch, want 2 (the writes too old to stand in)", n)
	}
	if _, err := s.ownTip(ctx, k, train); !errors.Is(err, forge.ErrNotFound) || gh.CallCount(fakegithub.RouteGetRef) != 2 {
		t.Errorf("just deleted: %v, %d reads; want ErrNotFound without a read", err, gh.CallCount(fakegithub.RouteGetRef))
	}

	landed := leasedo.Landed{Tip: "abc", Recent: []lifecycle.LandedPR{{Number: 1, At: clk.Now().UnixMilli()}}}
	for _, tc := range []struct {
		after  time.Duration
		within bool
	}{{0, true}, {readLag - time.Millisecond, true}, {readLag, false}, {-time.Second, false}} {
		clk.Set(time.UnixMilli(landed.Recent[0].At).Add(tc.after))
		if got := s.landedWithin(landed, readLag); got != tc.within {
			t.Errorf("%s after the landing: landedWithin %v, want %v", tc.after, got, tc.within)
		}
	}
}

// What deliveries said concluded is kept for rules.ReadLag, at most
// maxConcluded names a commit, and nothing of a name or sha no GitHub
// check has: whoever holds the webhook secret cannot grow it without
// bound.
func TestConcludedIsBounded(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	s := NewSyncer(SyncConfig{Clock: clk})
	k := leasedo.Key{Tenant: "1", Repo: "o/r"}
	sha := strings.Repeat("a", 40)
	for i := range maxConcluded + 10 {
		s.Concluded(k, sha, "check "+strconv.Itoa(i))
	}
	s.Concluded(k, sha, strings.Repeat("x", maxCheckName+1))
	s.Concluded(k, strings.Repeat("b", maxSHA+1), "ci")
	if got := s.concludedOn(k, sha); len(got) != maxConcluded || got[0] != "check 0" {
		t.Fatalf("kept %d names (%q first), want the first %d", len(got), got[0], maxConcluded)
	}
	if got := s.concludedOn(k, strings.Repeat("b", maxSHA+1)); got != nil {
		t.Fatalf("kept %q for an over-long sha", got)
	}
	clk.Advance(rules.ReadLag)
	if got := s.concludedOn(k, sha); got != nil {
		t.Fatalf("kept %q past rules.ReadLag", got)
	}
}
