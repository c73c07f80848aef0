package webhook

import (
	"context"
	"sync"
	"time"
)

// DefaultBodyBudget is how many bytes the bodies of all requests being read
// may hold at once, process-wide, unless HandlerConfig.Budget says
// otherwise. It leaves room for one GitHub-sized delivery (25 MiB, whose
// buffer briefly holds its old and new capacity while it grows) beside the
// usual traffic of 20-30 KB deliveries.
const DefaultBodyBudget int64 = 64 << 20

// DefaultBudgetWait is how long a request waits for room in the budget
// before it is answered 503.
const DefaultBudgetWait = time.Second

// Budget caps the bytes held by request bodies in flight. A body reserves
// its buffer's capacity before the buffer is allocated and gives it back
// when the handler returns, so that what unauthenticated requests can make
// the process hold is bounded whatever they declare in Content-Length.
// It is safe for concurrent use.
type Budget struct {
	mu      sync.Mutex
	limit   int64
	used    int64
	peak    int64
	waiters int
	freed   chan struct{} // closed (and replaced) when bytes are given back to waiters
}

// NewBudget returns a budget of limit bytes.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, freed: make(chan struct{})}
}

// defaultBudget is shared by every handler built without a Budget: the
// set-up flow swaps the webhook handler at run time, and the cap is the
// process's, not one handler's.
var defaultBudget = NewBudget(DefaultBodyBudget)

// InUse returns the bytes reserved now and the most reserved at once.
func (b *Budget) InUse() (now, peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.peak
}

// Waiting returns how many requests wait for room.
func (b *Budget) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters
}

// reserve takes n bytes, waiting until timeout fires or ctx ends (a nil
// timeout: not at all); false when there was no room in time. A request
// larger than the whole budget never fits.
func (b *Budget) reserve(ctx context.Context, n int64, timeout <-chan time.Time) bool {
	b.mu.Lock()
	for {
		if b.used+n <= b.limit {
			b.used += n
			b.peak = max(b.peak, b.used)
			b.mu.Unlock()
			return true
		}
		if n > b.limit || timeout == nil {
			b.mu.Unlock()
			return false
		}
		b.waiters++
		freed := b.freed
		b.mu.Unlock()
		var ok bool
		select {
		case <-freed:
			ok = true
		case <-timeout:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.waiters--
		if !ok {
			b.mu.Unlock()
			return false
		}
	}
}

// release gives n bytes back and wakes the waiters.
func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
	b.mu.Unlock()
}
