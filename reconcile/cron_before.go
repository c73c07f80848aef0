package reconcile

import "context"

// Before makes every run of the cron, the start-up one included, call fn
// first with the run's context (the redelivery sweep: deliveries GitHub
// could not hand over are asked for again before the resync looks for
// what they would have said). Call it before Start.
func (c *Cron) Before(fn func(ctx context.Context)) {
	run := c.run
	c.run = func(ctx context.Context) (Summary, error) {
		fn(ctx)
		return run(ctx)
	}
}
