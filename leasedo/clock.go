package leasedo

import (
	"sync"
	"time"
)

// ManualClock is a Clock moved by hand: tests and offline replay use it so
// that TTL rules and retries are exercised without sleeping. Its timers
// fire when Advance or Set moves it to or past their deadline.
type ManualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*manualTimer // pending, in no particular order
}

// NewManualClock starts at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (negative moves it back) and fires the
// timers whose deadline it reached.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fireLocked()
	c.mu.Unlock()
}

// Set moves the clock to t and fires the timers whose deadline it reached.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.fireLocked()
	c.mu.Unlock()
}

// NewTimer returns a timer that fires when the clock reaches now+d; at
// once when d <= 0.
func (c *ManualClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &manualTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// NextTimer is the earliest deadline of a pending timer; false when none
// is pending. A test that waits for work to finish moves the clock there.
func (c *ManualClock) NextTimer() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, t := range c.timers {
		if next.IsZero() || t.at.Before(next) {
			next = t.at
		}
	}
	return next, !next.IsZero()
}

// fireLocked sends on and drops every pending timer whose deadline is due.
func (c *ManualClock) fireLocked() {
	keep := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			keep = append(keep, t)
			continue
		}
		t.ch <- c.now // buffered, sent at most once
	}
	clear(c.timers[len(keep):])
	c.timers = keep
}

type manualTimer struct {
	c  *ManualClock
	at time.Time
	ch chan time.Time
}

func (t *manualTimer) C() <-chan time.Time { return t.ch }

// Stop removes the timer from its clock's pending timers.
func (t *manualTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.timers {
		if p == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}
