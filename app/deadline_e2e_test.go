package app

import (
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/policy"
)

// Issue 31 point 7: check_timeout fires at its deadline, not at the
// cron's next pass (an hour away in the harness), and its timer is
// restored after a restart by the start-up pass. The timeout, 30 s, is
// beyond the clock moves the harness makes on its own (retryHorizon).
func TestCheckTimeoutFiresAtItsDeadline(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "running"
		if restart {
			name = "after a restart"
		}
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.gh.SetFile(testRepo, policy.Path, "check_timeout: 30s\n")
			h.pushPolicy()
			h.settle()
			h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
			joined := h.clock.Now()
			h.label(7, shaA)
			h.gh.SetCheckRun(testRepo, shaA, "ci/build", "in_progress", "")
			h.checkSuite(shaA)
			deadline := joined.Add(30 * time.Second)
			timerAt := func() bool { at, ok := h.clock.NextTimer(); return ok && at.Equal(deadline) }
			testkit.Eventually(t, "a timer for #7's deadline", timerAt)
			if restart {
				h.restart(false)
				testkit.Eventually(t, "the timer restored by the start-up pass", timerAt)
			}
			testkit.Eventually(t, "the engine idle, the clock still", func() bool {
				keys, err := h.app.Store.PendingKeys(t.Context())
				return err == nil && len(keys) == 0 && h.app.Engine.Busy() == 0
			})
			if q := h.queue(); len(q) != 1 || q[0].Status != leasedo.StatusEvaluating || len(h.gh.Comments()) != 0 {
				t.Fatalf("before the deadline: queue %+v, comments %+v", q, h.gh.Comments())
			}
			h.clock.Set(deadline)
			testkit.Eventually(t, "the bounce at the deadline", func() bool { return len(h.gh.Comments()) == 1 })
			if c := h.gh.Comments()[0].Body; !strings.Contains(c, `its required check "ci/build" did not finish within 30s`) {
				t.Errorf("comment = %q", c)
			}
			if now := h.clock.Now(); !now.Equal(deadline) {
				t.Errorf("bounced at %s, %s after the deadline", now, now.Sub(deadline))
			}
		})
	}
}
