package reconcile

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
)

// Before runs its function ahead of every pass, the start-up one included,
// with the pass's context.
func TestCronBeforeRunsAheadOfEachPass(t *testing.T) {
	e := newEnv(t)
	c := newCron(t, e, time.Hour)
	var mu sync.Mutex
	var order []string
	c.run = func(ctx context.Context) (Summary, error) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, "pass")
		return Summary{}, nil
	}
	c.Before(func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the hook's context has no deadline")
		}
		order = append(order, "before")
	})
	c.Start()
	testkit.Eventually(t, "the start pass", func() bool { return c.Runs() == 1 })
	c.tick() // a scheduled pass
	mu.Lock()
	defer mu.Unlock()
	if got := len(order); got != 4 || order[0] != "before" || order[1] != "pass" || order[2] != "before" || order[3] != "pass" {
		t.Fatalf("order = %v, want before, pass, before, pass", order)
	}
}
