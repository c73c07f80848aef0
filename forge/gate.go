package forge

import (
	"fmt"
	"sort"
)

// Gate results.
const (
	GateSuccess = "success"
	GateFailure = "failure"
	GatePending = "pending"
)

// Verdict is the result of a gate evaluation, with one sentence a developer
// understands.
type Verdict struct {
	Result string // GateSuccess, GateFailure or GatePending
	Reason string
	// Waiting names, while pending, every required check (or App suite)
	// that has not concluded, in the order of the requirement.
	Waiting []string
}

// outcome of one check.
const (
	passed  = iota // success, neutral, skipped
	failed         // failure, cancelled, timed_out, action_required, error, startup_failure
	waiting        // queued, in progress, pending, stale, missing, unknown
)

// EvaluateGate decides the gate of one PR at one sha (SPEC §4).
//
// The required checks are req.Contexts when req.Configured and the list is
// not empty; otherwise every check run and status reported in results.
// mergegate's own check run (DefaultCheckRunName) is never part of the gate.
//
//   - failure: a required check concluded failure, cancelled, timed_out,
//     action_required or startup_failure (check runs), or error/failure
//     (statuses). Failure wins over pending.
//   - pending: a required check is missing, not completed, stale, or has an
//     unknown conclusion.
//   - success: every required check concluded success; neutral and skipped
//     count as success.
//
// A name reported by both a check run and a status must pass in both. When
// several results share a name and a source, the latest (At) is used.
//
// Decision for the empty case: when nothing is required and nothing is
// reported the verdict is pending ("no checks reported yet"), never success:
// checks often appear a few seconds after a push, and merging before any
// check ran would defeat the gate. A repository with no CI at all must say
// so by requiring nothing and letting a check (e.g. a status) report.
func EvaluateGate(req Required, results []CheckResult, suites []CheckSuite) Verdict {
	// Latest result per (name, source).
	type key struct{ name, source string }
	latest := map[key]CheckResult{}
	for _, r := range results {
		if r.Source == SourceCheckRun && r.Name == DefaultCheckRunName {
			continue
		}
		k := key{r.Name, r.Source}
		if prev, ok := latest[k]; !ok || r.At.After(prev.At) {
			latest[k] = r
		}
	}

	var required []string
	explicit := req.Configured && len(req.Contexts) > 0
	if explicit {
		required = req.Contexts
	} else {
		seen := map[string]bool{}
		for k := range latest {
			if !seen[k.name] {
				seen[k.name] = true
				required = append(required, k.name)
			}
		}
		sort.Strings(required)
	}
	if len(required) == 0 {
		return Verdict{Result: GatePending, Reason: "no checks reported yet"}
	}

	noun := "check"
	if explicit {
		noun = "required check"
	}
	var firstWaiting *Verdict
	for _, name := range required {
		var found []CheckResult
		for _, src := range []string{SourceCheckRun, SourceStatus} {
			if r, ok := latest[key{name, src}]; ok {
				found = append(found, r)
			}
		}
		if len(found) == 0 {
			if firstWaiting == nil {
				firstWaiting = &Verdict{Result: GatePending, Reason: fmt.Sprintf("waiting for %s %q, which has not reported yet", noun, name)}
			}
			continue
		}
		for _, r := range found {
			switch outcome(r) {
			case failed:
				return Verdict{Result: GateFailure, Reason: fmt.Sprintf("%s %q concluded %s", noun, name, r.Conclusion)}
			case waiting:
				if firstWaiting == nil {
					firstWaiting = &Verdict{Result: GatePending, Reason: fmt.Sprintf("waiting for %s %q", noun, name)}
				}
			}
		}
	}
	if firstWaiting != nil {
		return *firstWaiting
	}
	if len(required) == 1 {
		return Verdict{Result: GateSuccess, Reason: fmt.Sprintf("%s %q passed", noun, required[0])}
	}
	return Verdict{Result: GateSuccess, Reason: fmt.Sprintf("all %d %ss passed", len(required), noun)}
}

func outcome(r CheckResult) int {
	if r.Source == SourceStatus {
		switch r.Conclusion {
		case "success":
			return passed
		case "failure", "error":
			return failed
		default:
			return waiting
		}
	}
	if r.Status != "completed" {
		return waiting
	}
	switch r.Conclusion {
	case "success", "neutral", "skipped":
		return passed
	case "failure", "cancelled", "timed_out", "action_required", "startup_failure":
		return failed
	default: // stale, empty or unknown
		return waiting
	}
}
