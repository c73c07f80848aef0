package forge

import (
	"context"
	"runtime"
	"testing"
)

// granted reports whether ch was closed (its waiter let in).
func granted(ch <-chan error) bool {
	select {
	case err := <-ch:
		return err == nil
	default:
		return false
	}
}

// The slots' size changes under load: a smaller bound lets nobody in
// until the requests in flight are below it; a larger one lets the first
// waiters in at once; waiters go in arrival order throughout, and one
// that gives up leaves its place to the next.
func TestSlotsResizeInArrivalOrder(t *testing.T) {
	s := newSlots(4)
	for range 4 {
		if !s.tryAcquire() {
			t.Fatal("a free slot was refused")
		}
	}
	ctx := context.Background()
	var waiters []chan error
	// wait starts a waiter and returns once it is in line, the inLine-th.
	wait := func(ctx context.Context, inLine int) chan error {
		ch := make(chan error, 1)
		go func() { ch <- s.acquire(ctx) }()
		for {
			s.mu.Lock()
			n := s.waiters.Len()
			s.mu.Unlock()
			if n == inLine {
				return ch
			}
			runtime.Gosched()
		}
	}
	for i := range 3 {
		waiters = append(waiters, wait(ctx, i+1))
	}
	s.setLimit(2) // 4 in flight, bound 2
	s.release()   // 3 in flight
	s.release()   // 2 in flight: still nobody
	if granted(waiters[0]) || granted(waiters[1]) {
		t.Fatal("a waiter went in while the requests in flight were not below the new bound")
	}
	s.release() // 1 in flight: the first waiter goes
	if err := <-waiters[0]; err != nil {
		t.Fatal(err)
	}
	if granted(waiters[1]) {
		t.Fatal("the second waiter went in past the bound")
	}
	// A waiter that gives up leaves its place.
	gone, cancel := context.WithCancel(ctx)
	quitter := wait(gone, 3) // behind the second and third
	cancel()
	if err := <-quitter; err == nil {
		t.Fatal("a waiter whose context ended got a slot")
	}
	s.setLimit(4) // 2 in flight: the next two waiters go at once, in order
	if err := <-waiters[1]; err != nil {
		t.Fatal(err)
	}
	if err := <-waiters[2]; err != nil {
		t.Fatal(err)
	}
	if s.used != 4 || s.waiters.Len() != 0 {
		t.Fatalf("used %d, waiting %d; want 4 and 0", s.used, s.waiters.Len())
	}
}
