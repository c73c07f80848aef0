package app

import (
	"fmt"
	"math/rand"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// drainRun is one drain of the benchmark's queue.
type drainRun struct {
	mode          string
	ciLengths     float64 // simulated time to drain, in CI lengths
	ciRuns        int
	merged        int
	callsPerMerge float64
	culprit       int // the one of the breaking pair taken out
	later         int // the later of the pair in the queue: the one to take out
	// writesPerMerge and chargedPerMerge are its content-generating
	// requests and its calls counted against the primary rate limit, per
	// merged pull request (as TestWritesPerMergedPRDoNotGrowWithTheQueue).
	writesPerMerge, chargedPerMerge float64
}

// The benchmark's queue (docs/trains.md): 20 pull requests, CI of a fixed
// length, two bad pull requests and one pair that breaks only together.
var (
	drainPRs      = 20
	drainBad      = []int{6, 15}
	drainBreaking = [][2]int{{9, 12}}
	// The trains of the benchmark: the defaults, and groups of one,
	// twenty at once, each pull request tested with those ahead of it as
	// GitHub's merge queue builds them.
	drainTrainDefaults = "mode: train\n"
	drainTrainWide     = "mode: train\nbatch_size: 1\nparallel: 20\n"
	// Trains that speculate (pull requests join groups while their own
	// checks run): five groups of four, the whole queue at once, and
	// groups of one.
	drainTrainSpeculate     = "mode: train\nparallel: 5\nspeculate: true\n"
	drainTrainWideSpeculate = drainTrainWide + "speculate: true\n"
)

// drain queues the benchmark's pull requests under policyFile (strict:
// the base requires up-to-date branches) and runs CI until the queue is
// empty, checking that the base only ever moved to commits that passed.
func drain(t testing.TB, mode, policyFile string, strict bool) drainRun {
	return drainSeeded(t, mode, policyFile, strict, 0)
}

// drainJitter is how far a jittered drain's CI runs are early or late.
const drainJitter = ciLength / 3

// drainSeeded is drain with the pull requests queued in a random order, a
// second apart, and CI runs of random lengths (ciLength plus or minus
// drainJitter) reporting in a random order, drawn from seed (0: queued
// in number order, no jitter): results arrive late, early and out of
// order, as in real time. Groups follow the queue (batch_wait), so the one
// of the breaking pair taken out is the later in the queue, whichever
// became ready first.
func drainSeeded(t testing.TB, mode, policyFile string, strict bool, seed int64) drainRun {
	return drainDriven(t, mode, policyFile, strict, seed, stepped)
}

// A drainDriver runs CI until done holds and returns how long that took
// on the harness's clock.
type drainDriver func(h *harness, done func() bool) time.Duration

// stepped moves the clock from one event to the next once mergegate has
// done all it had to (runCI): what mergegate takes to act costs no time.
func stepped(h *harness, done func() bool) time.Duration { return h.runCI(400, done) }

// running lets the clock run drainScale times faster than the wall clock
// (runCIRunning): a CI length is two seconds.
func running(h *harness, done func() bool) time.Duration {
	return h.runCIRunning(drainScale, 100*ciLength, done)
}

const drainScale = float64(ciLength / (2 * time.Second))

// drainDriven is drainSeeded with the clock moved by driver.
func drainDriven(t testing.TB, mode, policyFile string, strict bool, seed int64, driver drainDriver) drainRun {
	ci := fakegithub.CI{Bad: drainBad, Breaking: drainBreaking}
	if seed != 0 {
		ci.Jitter, ci.Seed = drainJitter, seed
		t.Logf("%s: CI jitter %s, seed %d", mode, drainJitter, seed)
	}
	// The write budget's waits are part of the drain (the horizon); the
	// check timeout's timer, an hour on, is not (CI always reports).
	h := trainHarness(t, policyFile, ci, withoutCheckTimeout, withWallClock)
	h.horizon, h.patience = 2*time.Minute, 2*time.Minute
	h.gh.SetRequired(testRepo, testBase, []string{"ci"}, strict)
	h.gh.AllowPush(testRepo, testBase)
	calls0, charged0 := apiCallsCharged(h)
	writes0 := h.gh.Writes(testTenant)
	var ns []int
	for n := 1; n <= drainPRs; n++ {
		ns = append(ns, n)
	}
	queued := slices.Clone(ns)
	if seed != 0 {
		rand.New(rand.NewSource(seed)).Shuffle(len(queued), func(i, j int) { queued[i], queued[j] = queued[j], queued[i] })
		t.Logf("%s: queued in the order %v", mode, queued)
	}
	for _, n := range queued {
		h.openLabeled(n)
		if seed != 0 {
			h.clock.Advance(time.Second)
		}
	}
	took := driver(h, h.queueEmpty)
	h.settle() // the train's branches are deleted after its last landing
	// Groups follow the queue, so the later of the pair is the one taken
	// out, unless the earlier one's own checks finished more than
	// batch_wait after the later one's: the later was grouped without it,
	// and the earlier, merged on top of it, is the one that broke the base.
	earlier, later := drainBreaking[0][0], drainBreaking[0][1]
	if slices.Index(queued, earlier) > slices.Index(queued, later) {
		earlier, later = later, earlier
	}
	culprit := later
	if seed != 0 {
		if pr, _ := h.gh.PR(testRepo, culprit); pr.Merged {
			culprit = earlier
		}
	}
	// In a train its author reads that it breaks the base with one of
	// those that landed since its own checks passed (since it was queued,
	// speculating), or with those ahead of it in the train (a train that
	// speculates may judge a group while one ahead that passed waits for
	// its own checks): the other of the pair among them.
	other := earlier + later - culprit
	if c := h.comments(culprit); strings.Contains(policyFile, "mode: train") {
		why := ""
		if len(c) == 1 {
			why = c[0]
			if i := strings.Index(why, "the pull requests ahead of it ("); i >= 0 {
				why = why[i:]
			} else if i := strings.Index(why, "; since "); i >= 0 {
				why = why[i:]
			} else {
				why = ""
			}
		}
		named := strings.Contains(why, fmt.Sprintf("#%d,", other)) || strings.Contains(why, fmt.Sprintf("#%d ", other)) || strings.Contains(why, fmt.Sprintf("#%d)", other))
		if !named {
			t.Errorf("%s: #%d's author read %q, want #%d named", mode, culprit, c, other)
		}
	}
	var want []int
	for _, n := range ns {
		if n != drainBad[0] && n != drainBad[1] && n != culprit {
			want = append(want, n)
		}
	}
	h.landedOnlyTested(want...)
	calls, charged := apiCallsCharged(h)
	per := func(n int) float64 { return float64(n) / float64(len(want)) }
	return drainRun{mode: mode, ciLengths: float64(took) / float64(ciLength), ciRuns: h.gh.CIRuns(testRepo), merged: len(want),
		callsPerMerge: per(calls - calls0), writesPerMerge: per(h.gh.Writes(testTenant) - writes0), chargedPerMerge: per(charged - charged0), culprit: culprit, later: later}
}

// Serial mode on a strict base beside train mode, in one run: the default
// train drains the same queue in at most a quarter of the time, twenty
// groups of one at once in at most a fifth (a sixth, measured), each
// spending no more writes and rate-limited calls per merged pull request
// than serial strict, and no mode ever moves the base to an untested
// commit.
func TestTrainDrainsFasterThanSerialStrict(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the drain benchmark runs 60 pull requests through three queues")
	}
	// Long simulations: beside each other, after the package's other tests.
	t.Parallel()
	serial := drain(t, "serial, strict base", "mode: serial\n", true)
	defaults := drain(t, "train, the defaults (batch_size 4, parallel 4)", drainTrainDefaults, false)
	wide := drain(t, "train, batch_size 1, parallel 20", drainTrainWide, false)
	t.Log("\n" + drainTable(serial, defaults, wide))
	if wide.ciLengths > serial.ciLengths/5 {
		t.Errorf("the train of groups of one took %.1f CI lengths, serial strict %.1f: want at most a fifth", wide.ciLengths, serial.ciLengths)
	}
	if defaults.ciLengths > serial.ciLengths/4 {
		t.Errorf("the default train took %.1f CI lengths, serial strict %.1f: want at most a quarter", defaults.ciLengths, serial.ciLengths)
	}
	for _, r := range []drainRun{defaults, wide} {
		r.costsNoMoreThan(t, serial)
	}
}

// costsNoMoreThan: the drain r spent no more writes, and no more calls
// counted against the rate limit, per merged pull request than serial.
func (r drainRun) costsNoMoreThan(t testing.TB, serial drainRun) {
	t.Helper()
	if r.writesPerMerge > serial.writesPerMerge {
		t.Errorf("%s: %.2f writes per merged pull request, want at most serial strict's %.2f", r.mode, r.writesPerMerge, serial.writesPerMerge)
	}
	if r.chargedPerMerge > serial.chargedPerMerge {
		t.Errorf("%s: %.2f rate-limited calls per merged pull request, want at most serial strict's %.2f", r.mode, r.chargedPerMerge, serial.chargedPerMerge)
	}
}

// The drain in real time: CI lengths vary and results arrive in any
// order (three seeds, each printed). Only tested commits land, every good
// pull request merges once, the bad ones and the later of the pair (#12,
// even where it was ready before #9: groups follow the queue) are taken
// out; the default train drains in at most a quarter of serial strict
// time, for no more writes or rate-limited calls per merged pull request;
// a train that speculates drains in at most a quarter too, taking out the
// same ones.
func TestTrainDrainJittered(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the drain benchmark runs 40 pull requests per seed")
	}
	// Long simulations: beside each other, after the package's other tests.
	t.Parallel()
	for _, seed := range drainSeeds[:3] {
		serial := drainSeeded(t, "serial, strict base", "mode: serial\n", true, seed)
		for _, train := range []struct {
			mode, file string
			// costs: held to serial strict's cost per merged pull request
			// on every seed. Speculating, pull requests whose own checks
			// fail cost the groups behind them a rebuild (docs/trains.md
			// gives the median and the worst).
			costs bool
		}{
			{"train, the defaults (batch_size 4, parallel 4)", drainTrainDefaults, true},
			{"train, speculate (batch_size 4, parallel 5)", drainTrainSpeculate, false},
		} {
			r := drainSeeded(t, train.mode, train.file, false, seed)
			t.Logf("seed %d: %s/serial %.2f\n%s", seed, train.mode, r.ciLengths/serial.ciLengths, drainTable(serial, r))
			if r.culprit != r.later {
				t.Errorf("seed %d, %s: #%d of the pair was taken out, want #%d, the later in the queue", seed, train.mode, r.culprit, r.later)
			}
			if r.ciLengths > serial.ciLengths/4 {
				t.Errorf("seed %d: %s took %.2f CI lengths, serial strict %.2f: want at most a quarter", seed, train.mode, r.ciLengths, serial.ciLengths)
			}
			if train.costs {
				r.costsNoMoreThan(t, serial)
			}
		}
	}
}

// runCIRunning is runCI with the clock running, scale times faster than
// the wall clock, whether or not mergegate has finished what it was
// doing: CI's results go out as they fall due, while mergegate handles
// others, and the time it takes to act (its GitHub calls, its database,
// the deliveries it queues) is part of the drain, as with GitHub. It
// returns the drain's time on the clock, and fails the test past limit.
func (h *harness) runCIRunning(scale float64, limit time.Duration, done func() bool) time.Duration {
	h.t.Helper()
	start, wall := h.clock.Now(), time.Now()
	updates := len(h.gh.BranchUpdates())
	for {
		h.clock.Set(start.Add(time.Duration(float64(time.Since(wall)) * scale)))
		h.gh.CompleteDueChecks()
		for ; updates < len(h.gh.BranchUpdates()); updates++ {
			u := h.gh.BranchUpdates()[updates]
			h.mustSend("pull_request", withSender(h.t, h.prPayload("synchronize", u.PRNumber, u.ToSHA, "automerge"), fakegithub.AppBotLogin))
		}
		if took := h.clock.Now().Sub(start); done() {
			return took
		} else if took > limit {
			h.t.Fatalf("not done after %s on the clock: queue %+v, groups %+v", limit, h.queue(), h.groups())
		}
		time.Sleep(time.Millisecond)
	}
}

// The drain with the clock running (runCIRunning): CI's results arrive
// while mergegate acts on others, and what it takes to act is time on the
// clock. What is checked holds at any speed, -race included: only tested
// commits land, every good pull request merges once, the bad ones and one
// of the pair are taken out and that one's author is told of the other,
// and no branch is left behind.
func TestTrainDrainRunningClock(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the drain runs 20 pull requests on the wall clock")
	}
	t.Parallel()
	r := drainDriven(t, "train, the defaults", drainTrainDefaults, false, drainSeeds[0], running)
	t.Logf("seed %d, the clock running: %.2f CI lengths, %d CI runs, %.1f calls per merged pull request, #%d taken out",
		drainSeeds[0], r.ciLengths, r.ciRuns, r.callsPerMerge, r.culprit)
}

// apiCallsCharged counts the requests to GitHub's API as production makes
// them, and how many of them count against the installation's primary
// rate limit: a conditional request answered 304 does not (GitHub's "Best
// practices for using the REST API"). Minting installation tokens is left
// out (in production one lasts an hour; on a harness clock behind the
// wall clock ghinstallation reads, every request mints one first), and so
// are requests refused 401 (an expired token: ghinstallation refreshes by
// the wall clock, a minute before expiry, but the harness's clock may run
// ahead of it; the request is sent again, and that one is counted).
func apiCallsCharged(h *harness) (calls, charged int) {
	for _, c := range h.gh.Calls() {
		if c.Route != fakegithub.RouteCreateToken && c.Status != http.StatusUnauthorized {
			calls++
			if !c.NotModified {
				charged++
			}
		}
	}
	return calls, charged
}

func drainTable(runs ...drainRun) string {
	var b strings.Builder
	b.WriteString("| mode | time to drain (CI lengths) | CI runs | merged | GitHub calls per merged pull request: all, rate-limited, writes |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.1f | %d | %d | %.1f, %.1f, %.1f |\n", r.mode, r.ciLengths, r.ciRuns, r.merged, r.callsPerMerge, r.chargedPerMerge, r.writesPerMerge)
	}
	return b.String()
}

// drainSeeds are the benchmark's seeds: ten jittered drains per mode
// (TestTrainDrainJittered keeps the first three, to stay fast).
var drainSeeds = []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

// BenchmarkTrainDrain reports the jittered drain of the benchmark's queue
// in each mode over drainSeeds, the median and the worst (simulated time:
// one iteration is the measurement) of the drain's ratio to serial strict
// on the same seed, of the CI runs and of the calls per merged pull
// request (all, those counted against the rate limit, and writes), the
// table of docs/trains.md:
// go test -run '^$' -bench 'TrainDrain$' -benchtime 1x -v ./app
// Each mode also drains once with CI of a fixed length (ratio-fixed).
func BenchmarkTrainDrain(b *testing.B) { benchDrain(b, stepped) }

// BenchmarkTrainDrainRunning is BenchmarkTrainDrain with the clock
// running (runCIRunning): what mergegate takes to act counts, and CI's
// results arrive while it acts. A CI length is two seconds of wall time,
// so the ten seeds of the five modes take about a quarter of an hour:
// go test -timeout 30m -run '^$' -bench 'TrainDrainRunning$' -benchtime 1x -v ./app
func BenchmarkTrainDrainRunning(b *testing.B) { benchDrain(b, running) }

func benchDrain(b *testing.B, driver drainDriver) {
	serial := map[int64]drainRun{}
	for _, m := range []struct {
		name, file string
		strict     bool
	}{
		{"serial-strict", "mode: serial\n", true},
		{"train-defaults", drainTrainDefaults, false},
		{"train-wide", drainTrainWide, false},
		{"train-speculate", drainTrainSpeculate, false},
		{"train-wide-speculate", drainTrainWideSpeculate, false},
	} {
		b.Run(m.name, func(b *testing.B) {
			var ratios, runs, calls, charged, writes []float64
			var earlier []int64 // seeds where the earlier of the pair in the queue was taken out
			for i := 0; i < b.N; i++ {
				ratios, runs, calls, charged, writes, earlier = nil, nil, nil, nil, nil, nil
				for _, seed := range drainSeeds {
					r := drainDriven(b, m.name, m.file, m.strict, seed, driver)
					if m.strict {
						serial[seed] = r
					}
					ratios = append(ratios, r.ciLengths/serial[seed].ciLengths)
					runs = append(runs, float64(r.ciRuns))
					calls = append(calls, r.callsPerMerge)
					charged = append(charged, r.chargedPerMerge)
					writes = append(writes, r.writesPerMerge)
					if r.culprit != r.later {
						earlier = append(earlier, seed)
					}
				}
			}
			// CI of a fixed length (no seed): what the same driver gives
			// without the spread of CI's durations.
			f := drainDriven(b, m.name, m.file, m.strict, 0, driver)
			if m.strict {
				serial[0] = f
			}
			b.Logf("%s over seeds %v: ratio to serial strict median %.2f worst %.2f; CI runs median %.0f worst %.0f; calls per merged pull request median %.1f worst %.1f (rate-limited %.1f, %.1f; writes %.2f, %.2f); the earlier of the pair in the queue taken out on seeds %v; CI of a fixed length: %.2f CI lengths, ratio %.3f",
				m.name, drainSeeds, median(ratios), worst(ratios), median(runs), worst(runs), median(calls), worst(calls), median(charged), worst(charged), median(writes), worst(writes), earlier,
				f.ciLengths, f.ciLengths/serial[0].ciLengths)
			b.ReportMetric(f.ciLengths/serial[0].ciLengths, "ratio-fixed")
			b.ReportMetric(median(ratios), "ratio-median")
			b.ReportMetric(worst(ratios), "ratio-worst")
			b.ReportMetric(median(runs), "ci-runs-median")
			b.ReportMetric(worst(runs), "ci-runs-worst")
			b.ReportMetric(median(calls), "calls/merge-median")
			b.ReportMetric(worst(calls), "calls/merge-worst")
			b.ReportMetric(median(writes), "writes/merge-median")
			b.ReportMetric(worst(writes), "writes/merge-worst")
		})
	}
}

// median is the middle of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// worst is the largest of xs: for a drain's ratio, runs and calls, more
// is worse.
func worst(xs []float64) float64 {
	w := 0.0
	for _, x := range xs {
		w = max(w, x)
	}
	return w
}
