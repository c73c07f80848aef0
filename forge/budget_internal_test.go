package forge

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The classes are served in order: as a window fills, check-run titles
// stop first (half the budget), then what tells a person (three
// quarters), then what unblocks; a merge may use the whole window. The
// writes held back wait for the oldest sends to age out of the window.
func TestWriteBudgetServesClassesInOrder(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	logs := &strings.Builder{} // one goroutine here
	b := newWriteBudget("7", clock, 60, 450, zerolog.New(logs))
	sent := func(c WriteClass, n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := b.take(c); err != nil {
				t.Fatalf("%s write %d: %v", c, i+1, err)
			}
		}
	}
	sent(ClassCosmetic, 30) // half of 60
	if err := b.take(ClassCosmetic); err == nil {
		t.Fatal("a 31st title in a minute went out; want it held back")
	}
	sent(ClassTell, 15) // to 45: three quarters
	if _, ok := IsWriteBudget(b.take(ClassTell)); !ok {
		t.Fatal("a 46th write that tells went out; want it held back")
	}
	sent(ClassUnblock, 9) // to 54
	if b.take(ClassUnblock) == nil {
		t.Fatal("a 55th branch update went out; want it held back")
	}
	sent(ClassLand, 6) // to 60: the whole minute
	err := b.take(ClassLand)
	be, ok := IsWriteBudget(err)
	if !ok || !be.RetryAt.Equal(now.Add(time.Minute)) || be.Class != ClassLand {
		t.Fatalf("61st merge: %v, want held back until the first write is a minute old", err)
	}
	if got := logs.String(); countLines(got, "held back") != 1 {
		t.Errorf("want one line saying writes are held back, got:\n%s", got)
	}
	now = now.Add(time.Minute)
	sent(ClassCosmetic, 30) // the minute's window emptied
	st := b.state()
	if st.LastMinute != 30 || st.LastHour != 90 || st.Sent["land"] != 6 || st.Sent["cosmetic"] != 60 {
		t.Errorf("state = %+v", st)
	}
	if !st.Held.IsZero() || countLines(logs.String(), "go out again") != 1 {
		t.Errorf("held %v, want writes going out again said once:\n%s", st.Held, logs.String())
	}
}

// The hour's window binds too: after 450 writes in an hour (a minute's
// 60 never reached) even a merge waits for the oldest to be an hour old.
func TestWriteBudgetHourWindow(t *testing.T) {
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := start
	b := newWriteBudget("7", func() time.Time { return now }, 60, 450, zerolog.Nop())
	for i := 0; i < 450; i++ {
		if err := b.take(ClassLand); err != nil {
			t.Fatalf("write %d at %s: %v", i+1, now.Sub(start), err)
		}
		now = now.Add(7 * time.Second) // 8.6 a minute
	}
	be, ok := IsWriteBudget(b.take(ClassLand))
	if !ok || !be.RetryAt.Equal(start.Add(time.Hour)) {
		t.Fatalf("451st write: %+v, want held until %s", be, start.Add(time.Hour))
	}
}

// Replicas on one database share the budget: each gets its part.
func TestWriteBudgetSharedByReplicas(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := newWriteBudget("7", func() time.Time { return now }, 60, 450, zerolog.Nop())
	b.setReplicas(3)
	n := 0
	for b.take(ClassLand) == nil {
		n++
	}
	if n != 20 {
		t.Errorf("one of 3 replicas sent %d merges in a minute, want 20 (60 / 3)", n)
	}
	if st := b.state(); st.PerMinute != 20 || st.PerHour != 150 {
		t.Errorf("limits = %d a minute, %d an hour; want 20 and 150", st.PerMinute, st.PerHour)
	}
}

// No bound (GitHub Enterprise Server without secondary limits).
func TestWriteBudgetOff(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	b := newWriteBudget("7", func() time.Time { return now }, -1, -1, zerolog.Nop())
	for i := 0; i < 1000; i++ {
		if err := b.take(ClassCosmetic); err != nil {
			t.Fatalf("write %d: %v", i+1, err)
		}
	}
}

func countLines(s, sub string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// The Client shares each installation's budget among the replicas it is
// told of (the replica registry's heartbeat), at once for those in use.
func TestClientSharesTheWriteBudgetAmongReplicas(t *testing.T) {
	c := &Client{cfg: Config{Clock: time.Now, WritesPerMinute: 60, WritesPerHour: 450}, insts: map[int64]*installation{}}
	in := &installation{budget: newWriteBudget("1", time.Now, 60, 450, zerolog.Nop())}
	c.insts[1] = in
	in.slots = newInflight(4, time.Second, time.Second, nil)
	c.SetReplicas(2)
	b, ok := c.WriteBudget("1")
	if !ok || b.PerMinute != 30 || b.PerHour != 225 {
		t.Fatalf("with 2 replicas: %+v, want 30 a minute and 225 an hour", b)
	}
}

// GitHub's 900 points a minute per endpoint: an installation's reads of
// one operation wait once it spent 800 in the last minute, and go when the
// minute moves on; other operations are not held up.
func TestEndpointPointsWaitForTheMinute(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b := newWriteBudget("7", clock, 60, 450, zerolog.Nop())
	ctx := context.Background()
	for i := 0; i < EndpointPointsPerMinute; i++ {
		if err := b.spend(ctx, "checks.list-for-ref", 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.spend(ctx, "pulls.get", 1); err != nil {
		t.Fatalf("another operation: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.spend(ctx, "checks.list-for-ref", 1) }()
	select {
	case err := <-done:
		t.Fatalf("the 801st read of a minute went at once (%v); want it to wait", err)
	case <-time.After(50 * time.Millisecond):
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read still waits a minute later")
	}
	cctx, cancel := context.WithCancel(ctx)
	for i := 0; i < EndpointPointsPerMinute; i++ {
		b.spend(ctx, "pulls.list", 1)
	}
	cancel()
	if err := b.spend(cctx, "pulls.list", 1); err == nil {
		t.Fatal("a read whose context ended went all the same")
	}
}
