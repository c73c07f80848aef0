package forge

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/mergegate/mergegate/lifecycle"
)

// outcome of one check.
const (
	passed  = iota // success, neutral, skipped
	failed         // failure, cancelled, timed_out, action_required, stale, startup_failure, error
	waiting        // queued, in progress, pending, missing, unknown
)

// EvaluateGate decides the gate of one PR at one sha (docs/queue.md). It is pure:
// req, results and suites are what GitHub reported.
//
// The required checks are req.Contexts when req.Configured and the list is
// not empty (explicit); otherwise every check run and status reported in
// results. mergegate's own check run (DefaultCheckRunName) is never part of
// the gate.
//
//   - failure: a required check concluded failure, cancelled, timed_out,
//     action_required, stale (GitHub marks a run stale after 14 days
//     incomplete) or startup_failure (check runs), or error/failure
//     (statuses). Failure wins over pending.
//   - pending: a required check is missing, not completed, or has an
//     unknown conclusion. Waiting lists every such check in requirement
//     order.
//   - success: every required check concluded success; neutral and skipped
//     count as success.
//
// A name reported by both a check run and a status must pass in both. When
// several results share a name and a source, the latest (At) is used. A
// required check bound to an App (req.AppIDs) counts only that App's check
// runs: a status, or another App's run of the same name, does not satisfy
// it.
//
// When nothing is explicitly required, the gate also waits for every suite
// with runs (Runs > 0) that has not completed: an App whose runs are still
// being created would otherwise be missed. Suites with no runs stay queued
// forever on GitHub and are ignored; with an explicit list, suites are
// ignored.
//
// Decision for the empty case: when nothing is required and nothing is
// reported the verdict is pending ("no checks reported yet"), never success:
// checks often appear a few seconds after a push, and merging before any
// check ran would defeat the gate. A repository with no CI at all must say
// so by requiring nothing and letting a check (e.g. a status) report.
func EvaluateGate(req Required, results []CheckResult, suites []CheckSuite) Verdict {
	explicit := req.Configured && len(req.Contexts) > 0

	// Latest result per (name, source, App). An unbound check run's App
	// does not matter: the latest of any App is used, as before App
	// binding existed.
	type key struct {
		name, source string
		app          int64
	}
	latest := map[key]CheckResult{}
	for _, r := range results {
		if r.Source == SourceCheckRun && r.Name == DefaultCheckRunName {
			continue
		}
		k := key{r.Name, r.Source, 0}
		if _, bound := req.AppIDs[r.Name]; explicit && bound && r.Source == SourceCheckRun {
			k.app = r.AppID
		}
		if prev, ok := latest[k]; !ok || r.At.After(prev.At) {
			latest[k] = r
		}
	}

	var required []string
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

	var suitesWaiting []string
	if !explicit {
		for _, s := range suites {
			if s.Runs > 0 && s.Status != "completed" {
				suitesWaiting = append(suitesWaiting, suiteName(s))
			}
		}
	}
	if len(required) == 0 {
		return Verdict{Result: GatePending, Reason: "no checks reported yet", Waiting: suitesWaiting}
	}

	noun := "check"
	if explicit {
		noun = "required check"
	}
	var waitingFor []string
	var firstReason string
	wait := func(name, reason string) {
		if len(waitingFor) == 0 || waitingFor[len(waitingFor)-1] != name {
			waitingFor = append(waitingFor, name)
		}
		if firstReason == "" {
			firstReason = reason
		}
	}
	for _, name := range required {
		var found []CheckResult
		appID, bound := req.AppIDs[name]
		if explicit && bound {
			if r, ok := latest[key{name, SourceCheckRun, appID}]; ok {
				found = append(found, r)
			}
		} else {
			for _, src := range []string{SourceCheckRun, SourceStatus} {
				if r, ok := latest[key{name, src, 0}]; ok {
					found = append(found, r)
				}
			}
		}
		if len(found) == 0 {
			reason := fmt.Sprintf("waiting for %s %s, which has not reported yet", noun, checkName(name))
			if explicit && bound && reportedByOthers(latest, name) {
				reason = fmt.Sprintf("waiting for required check %s from GitHub App %d: another App or a status reported it, which does not count", checkName(name), appID)
			}
			wait(name, reason)
			continue
		}
		for _, r := range found {
			switch outcome(r) {
			case failed:
				return Verdict{Result: GateFailure, Reason: fmt.Sprintf("%s %s concluded %s", noun, checkName(name), r.Conclusion)}
			case waiting:
				wait(name, fmt.Sprintf("waiting for %s %s", noun, checkName(name)))
			}
		}
	}
	if len(waitingFor) > 0 {
		return Verdict{Result: GatePending, Reason: firstReason, Waiting: append(waitingFor, suitesWaiting...)}
	}
	if len(suitesWaiting) > 0 {
		return Verdict{Result: GatePending, Reason: fmt.Sprintf("waiting for the checks of GitHub App %s", checkName(suitesWaiting[0])), Waiting: suitesWaiting}
	}
	if len(required) == 1 {
		return Verdict{Result: GateSuccess, Reason: fmt.Sprintf("%s %s passed", noun, checkName(required[0]))}
	}
	return Verdict{Result: GateSuccess, Reason: fmt.Sprintf("all %d %ss passed", len(required), noun)}
}

// reportedByOthers reports whether any result in latest carries name.
func reportedByOthers[K comparable](latest map[K]CheckResult, name string) bool {
	for _, r := range latest {
		if r.Name == name {
			return true
		}
	}
	return false
}

// suiteName is the App's slug, or its id when GitHub sent no slug.
func suiteName(s CheckSuite) string {
	if s.AppSlug != "" {
		return s.AppSlug
	}
	return fmt.Sprintf("app %d", s.AppID)
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
	case "failure", "cancelled", "timed_out", "action_required", "stale", "startup_failure":
		return failed
	default: // empty or unknown
		return waiting
	}
}

// checkName is a check's (or status's, or App's) name quoted in a gate's
// reason, which goes into comments and check run summaries: whoever
// names a check (a fork's workflow) must not mention, link or reference
// anyone there.
func checkName(name string) string { return lifecycle.Inert(strconv.Quote(name)) }
