package app

import (
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
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
			testkit.Eventually(t, "the bounce at the deadline", func() bool {
				q := h.queue()
				return len(q) == 1 && q[0].Status == leasedo.StatusBounced
			})
			if now := h.clock.Now(); !now.Equal(deadline) {
				t.Errorf("bounced at %s, %s after the deadline", now, now.Sub(deadline))
			}
			// The comment goes out as writes do (it may wait its turn).
			h.eventually("the bounce's comment", func() bool { return len(h.gh.Comments()) == 1 })
			if c := h.gh.Comments()[0].Body; !strings.Contains(c, `its required check "ci/build" did not finish within 30s`) {
				t.Errorf("comment = %q", c)
			}
		})
	}
}

// A train's group whose CI never reports fails at its check_timeout
// deadline, counted from when it was built: the engine's timer runs the
// sync then (CI runs on the pull requests' heads only here, never on
// mergegate/**).
func TestTrainGroupTimesOutAtItsDeadline(t *testing.T) {
	h := trainHarness(t, "mode: train\ncheck_timeout: 30m\n", fakegithub.CI{Branches: []string{"feature-*"}})
	h.gh.AllowPush(testRepo, testBase)
	h.openLabeled(1)
	h.settle()
	h.clock.Advance(ciLength)
	h.gh.CompleteDueChecks()
	testkit.Eventually(t, "#1's group under test", func() bool {
		gs := h.groups()
		return len(gs) == 1 && gs[0].State == leasedo.GroupTesting && gs[0].BuiltAt > 0 && h.app.Engine.Busy() == 0
	})
	deadline := time.UnixMilli(h.groups()[0].BuiltAt).Add(30 * time.Minute)
	testkit.Eventually(t, "a timer at the group's deadline", func() bool { at, ok := h.clock.NextTimer(); return ok && at.Equal(deadline) })
	h.clock.Set(deadline)
	testkit.Eventually(t, "#1 bounced at the group's deadline", func() bool {
		q := h.queue()
		return len(q) == 1 && q[0].Status == leasedo.StatusBounced
	})
	if len(h.merges()) != 0 || !h.clock.Now().Equal(deadline) {
		t.Errorf("merges %+v; bounced at %s, want %s", h.merges(), h.clock.Now(), deadline)
	}
	h.eventually("#1's author told", func() bool { return len(h.comments(1)) == 1 })
	if c := h.comments(1)[0]; !strings.Contains(c, "30m") {
		t.Errorf("#1's author read %q", c)
	}
}
