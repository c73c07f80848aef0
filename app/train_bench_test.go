package app

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge/fakegithub"
)

// drainRun is one drain of the benchmark's queue.
type drainRun struct {
	mode          string
	ciLengths     float64 // simulated time to drain, in CI lengths
	ciRuns        int
	merged        int
	callsPerMerge float64
}

// The benchmark's queue (docs/trains.md): 20 pull requests, CI of a fixed
// length, two bad pull requests and one pair that breaks only together.
var (
	drainPRs      = 20
	drainBad      = []int{6, 15}
	drainBreaking = [][2]int{{9, 12}}
	drainMerged   = 20 - 3 // every one but the two bad ones and the second of the pair
)

// drain queues the benchmark's pull requests under policyFile (strict:
// the base requires up-to-date branches) and runs CI until the queue is
// empty, checking that the base only ever moved to commits that passed.
func drain(t testing.TB, mode, policyFile string, strict bool) drainRun {
	h := trainHarness(t, policyFile, fakegithub.CI{Bad: drainBad, Breaking: drainBreaking})
	h.gh.SetRequired(testRepo, testBase, []string{"ci"}, strict)
	h.gh.AllowPush(testRepo, testBase)
	calls0 := len(h.gh.Calls())
	var ns []int
	for n := 1; n <= drainPRs; n++ {
		ns = append(ns, n)
	}
	h.openLabeled(ns...)
	took := h.runCI(400, h.queueEmpty)
	var want []int
	for _, n := range ns {
		if n != drainBad[0] && n != drainBad[1] && n != drainBreaking[0][1] {
			want = append(want, n)
		}
	}
	h.landedOnlyTested(want...)
	return drainRun{mode: mode, ciLengths: float64(took) / float64(ciLength), ciRuns: h.gh.CIRuns(testRepo), merged: len(want),
		callsPerMerge: float64(len(h.gh.Calls())-calls0) / float64(len(want))}
}

// Serial mode on a strict base beside train mode, in one run: the train
// drains the same queue in at most a quarter of the time, and neither
// ever moves the base to an untested commit.
func TestTrainDrainsFasterThanSerialStrict(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the drain benchmark runs 40 pull requests through both modes")
	}
	serial := drain(t, "serial, strict", "mode: serial\n", true)
	train := drain(t, "train", "mode: train\nbatch_size: 4\nparallel: 3\n", false)
	t.Log("\n" + drainTable(serial, train))
	if train.ciLengths > serial.ciLengths/4 {
		t.Errorf("the train took %.1f CI lengths, serial strict %.1f: want at most a quarter", train.ciLengths, serial.ciLengths)
	}
}

func drainTable(runs ...drainRun) string {
	var b strings.Builder
	b.WriteString("| mode | time to drain (CI lengths) | CI runs | merged | GitHub calls per merged pull request |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "| %s | %.1f | %d | %d | %.1f |\n", r.mode, r.ciLengths, r.ciRuns, r.merged, r.callsPerMerge)
	}
	return b.String()
}

// BenchmarkTrainDrain reports the drain of the benchmark's queue in both
// modes, the table of docs/trains.md (simulated time: one iteration is
// the measurement): go test -run '^$' -bench TrainDrain -benchtime 1x ./app
func BenchmarkTrainDrain(b *testing.B) {
	for _, m := range []struct {
		name, file string
		strict     bool
	}{
		{"serial-strict", "mode: serial\n", true},
		{"train", "mode: train\nbatch_size: 4\nparallel: 3\n", false},
	} {
		b.Run(m.name, func(b *testing.B) {
			var r drainRun
			for i := 0; i < b.N; i++ {
				r = drain(b, m.name, m.file, m.strict)
			}
			b.ReportMetric(r.ciLengths, "ci-lengths")
			b.ReportMetric(float64(r.ciRuns), "ci-runs")
			b.ReportMetric(r.callsPerMerge, "calls/merge")
		})
	}
}
