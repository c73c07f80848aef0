package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// BounceKind is why a pull request was taken out of the queue.
type BounceKind string

const (
	BounceGateFailure   BounceKind = "gate_failure"   // a required check failed
	BounceCheckTimeout  BounceKind = "check_timeout"  // required checks never concluded
	BounceConflict      BounceKind = "conflict"       // conflicts with the base
	BounceMergeRefused  BounceKind = "merge_refused"  // GitHub refused the merge, for a reason not sorted otherwise
	BounceUpdateRefused BounceKind = "update_refused" // GitHub could not update the branch
	BounceTrainFailure  BounceKind = "train_failure"  // passed alone, failed merged with the base (a train group of one)
	BounceTrainConflict BounceKind = "train_conflict" // does not merge with the base and the pull requests ahead of it
)

// Bounced is what a bounced author is told, before it is a sentence.
type Bounced struct {
	Kind BounceKind
	// Detail: the gate's verdict (gate_failure), GitHub's message
	// (merge_refused, update_refused, enqueue_refused; "" when GitHub gave
	// none) or GitHub's reason for removing it from its merge queue
	// (merge_group_failed, dequeued).
	Detail string
	Base   string        // conflict, update_refused, the merge queue's kinds
	Checks []string      // check_timeout: the checks that never concluded (none: nothing reported)
	After  time.Duration // check_timeout
	// Unrequired (check_timeout): the base requires no checks, so these are
	// the checks and Apps that reported on the head.
	Unrequired bool
	// At (train_failure, train_conflict) is the commit the pull request
	// was merged onto: the base's tip with the pull requests Ahead.
	At    string
	Ahead []int
	// Since (train_failure): the pull requests the train landed on the
	// base after its own checks passed, oldest first. Its own checks did
	// not test it with them: one of them, or one ahead, breaks the base
	// with it.
	Since []int
	// SinceQueued: Since counts from when it was queued at its head, not
	// from when its own checks passed (a train that speculates tests it
	// while they run, and lands others meanwhile).
	SinceQueued bool
}

// Because is the clause after "because": what went wrong, in the author's
// terms, with no full stop. The audit log and the metrics keep it.
func (b Bounced) Because() string {
	detail := oneLine(b.Detail)
	switch b.Kind {
	case BounceMergeGroupFailed, BounceDequeued, BounceEnqueueRefused:
		return b.mergeQueueBecause(detail) // mergequeue.go
	case BounceGateFailure:
		return "its " + detail
	case BounceCheckTimeout:
		if len(b.Checks) == 0 {
			return fmt.Sprintf("no check reported on it within %s", duration(b.After))
		}
		noun := "required check"
		if b.Unrequired {
			noun = "check"
		}
		if len(b.Checks) > 1 {
			noun += "s"
		}
		return fmt.Sprintf("its %s %s did not finish within %s", noun, quoteList(b.Checks), duration(b.After))
	case BounceConflict:
		return "it has conflicts with " + b.Base + " that must be resolved on its branch"
	case BounceUpdateRefused:
		return "GitHub could not update its branch from " + b.Base + inParens(detail)
	case BounceTrainFailure:
		why := fmt.Sprintf("it passed its own checks but failed merged together with %s at %s: %s", b.onto(), lifecycle.ShortSHA(b.At), detail)
		if len(b.Since) > 0 {
			since := "its own checks passed"
			if b.SinceQueued {
				since = "it was queued at this commit"
			}
			why += fmt.Sprintf("; since %s, %s landed on %s, and it breaks the base together with one of them", since, numberList(b.Since, maxSince), b.Base)
			if len(b.Ahead) > 0 {
				why += " or with those ahead of it"
			}
		}
		return why
	case BounceTrainConflict:
		return fmt.Sprintf("it conflicts with %s at %s, so it must be updated on its branch", b.onto(), lifecycle.ShortSHA(b.At))
	}
	return "GitHub refused to merge it" + inParens(detail)
}

// onto names what a train's pull request was merged onto: the base, and
// the pull requests ahead of it in the train.
func (b Bounced) onto() string {
	if len(b.Ahead) == 0 {
		return b.Base
	}
	return b.Base + " and the pull requests ahead of it (" + numberList(b.Ahead, 0) + ")"
}

// maxSince is how many of Bounced.Since a sentence names, the latest:
// a queue of twenty landed in any order names them all, the one that
// breaks the base with it among them.
const maxSince = 20

// numberList is ns as "#1, #2 and #3"; with most > 0, the last most of
// them, after "N earlier pull requests, ".
func numberList(ns []int, most int) string {
	var nums []string
	if most > 0 && len(ns) > most {
		earlier := fmt.Sprintf("%d earlier pull requests", len(ns)-most)
		if len(ns)-most == 1 {
			earlier = "1 earlier pull request"
		}
		nums = append(nums, earlier)
		ns = ns[len(ns)-most:]
	}
	for _, n := range ns {
		nums = append(nums, fmt.Sprintf("#%d", n))
	}
	if len(nums) == 1 {
		return nums[0]
	}
	return strings.Join(nums[:len(nums)-1], ", ") + " and " + nums[len(nums)-1]
}

// inParens is GitHub's words in quotes and parentheses after a clause,
// nothing when GitHub said nothing.
func inParens(detail string) string {
	if detail == "" {
		return ""
	}
	return " (" + quote(detail) + ")"
}

// oneLine is a message of GitHub's as one clause, without its closing
// full stop. A ruleset's refusal comes on several lines
// ("Repository rule violations found\n\nCommits must have verified
// signatures.\n\n"): they are joined as "header: first; second", which
// keeps the author's sentence one paragraph.
func oneLine(msg string) string {
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSuffix(strings.TrimSpace(line), "."); line != "" {
			parts = append(parts, line)
		}
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.TrimSuffix(parts[0], ":") + ": " + strings.Join(parts[1:], "; ")
}

// BounceMessage is the one text a bounced pull request's author reads, as
// a comment and on mergegate's check run: what happened at which commit,
// why, and how to ask again. triggerLabel is "" when the label trigger is
// off (auto-merge is then the way back).
func BounceMessage(b Bounced, sha, triggerLabel string) string {
	again := "enable auto-merge again"
	if triggerLabel != "" {
		again = fmt.Sprintf("add the `%s` label again", triggerLabel)
	}
	if b.Kind == BounceDequeued {
		// Nothing to fix: the person who removed it decides.
		return fmt.Sprintf("mergegate took this pull request out of the merge queue at %s because %s. To queue it again, %s.",
			lifecycle.ShortSHA(sha), b.Because(), again)
	}
	return fmt.Sprintf("mergegate took this pull request out of the merge queue at %s because %s. Once that is fixed, %s.",
		lifecycle.ShortSHA(sha), b.Because(), again)
}

// quoteList: "a", "a" and "b", "a", "b" and "c".
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = lifecycle.Inert(quote(n)) // names a fork's workflow may choose
	}
	switch len(q) {
	case 0:
		return ""
	case 1:
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// duration writes 1h, 90m, 45s rather than Go's 1h0m0s.
func duration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
