package rules_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/rules"
)

const bouncedSHA = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"

// TestBounceMessage holds the exact sentence a bounced author reads for
// each kind of bounce, with the trigger label on and
// off, and checks each reads as one plain sentence.
func TestBounceMessage(t *testing.T) {
	const (
		lead     = "mergegate took this pull request out of the merge queue at a1a1a1a because "
		label    = " Once that is fixed, add the `automerge` label again."
		autoOnly = " Once that is fixed, enable auto-merge again."
	)
	tests := []struct {
		name string
		b    rules.Bounced
		// because is the clause after "because", up to the full stop.
		because string
	}{
		{"gate_failure from a required check",
			rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" concluded failure`},
			`its required check "ci/build" concluded failure`},
		{"gate_failure from a check that is not required (nothing is, so every check counts)",
			rules.Bounced{Kind: rules.BounceGateFailure, Detail: `check "lint" concluded timed_out`},
			`its check "lint" concluded timed_out`},
		{"gate_failure whose verdict ends in a full stop",
			rules.Bounced{Kind: rules.BounceGateFailure, Detail: `required check "ci/build" concluded stale.`},
			`its required check "ci/build" concluded stale`},
		{"check_timeout, one check, 1h",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build"}, After: time.Hour},
			`its required check "ci/build" did not finish within 1h`},
		{"check_timeout, a name that would mention and link",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"@acme [x](https://e.example)"}, After: time.Hour},
			"its required check \"@\u200bacme [x]\u200b(https:\u200b//e.example)\" did not finish within 1h"},
		{"check_timeout, no check reported at all",
			rules.Bounced{Kind: rules.BounceCheckTimeout, After: time.Hour},
			`no check reported on it within 1h`},
		{"check_timeout, checks not required (the base requires none)",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"e2e", "circleci"}, After: time.Hour, Unrequired: true},
			`its checks "e2e" and "circleci" did not finish within 1h`},
		{"check_timeout, three checks, 90m",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build", "e2e", "lint"}, After: 90 * time.Minute},
			`its required checks "ci/build", "e2e" and "lint" did not finish within 90m`},
		{"check_timeout, two checks, 45s",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build", "e2e"}, After: 45 * time.Second},
			`its required checks "ci/build" and "e2e" did not finish within 45s`},
		{"check_timeout, 2h",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build"}, After: 2 * time.Hour},
			`its required check "ci/build" did not finish within 2h`},
		{"check_timeout, 90s is neither whole minutes nor hours",
			rules.Bounced{Kind: rules.BounceCheckTimeout, Checks: []string{"ci/build"}, After: 90 * time.Second},
			`its required check "ci/build" did not finish within 1m30s`},
		{"conflict",
			rules.Bounced{Kind: rules.BounceConflict, Base: "release-1.x"},
			"it has conflicts with release-1.x that must be resolved on its branch"},
		{"merge_refused with GitHub's message, its full stop not doubled",
			rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Repository rule violations found: Commits must have verified signatures."},
			`GitHub refused to merge it ("Repository rule violations found: Commits must have verified signatures")`},
		{"merge_refused with GitHub's message without a full stop",
			rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Pull Request is not mergeable"},
			`GitHub refused to merge it ("Pull Request is not mergeable")`},
		{"merge_refused with GitHub's message of several lines (a ruleset's violations) reads on one line",
			rules.Bounced{Kind: rules.BounceMergeRefused, Detail: "Repository rule violations found\n\nCommits must have verified signatures.\n\nChanges must be made through a pull request.\n\n"},
			`GitHub refused to merge it ("Repository rule violations found: Commits must have verified signatures; Changes must be made through a pull request")`},
		{"merge_refused without a message says no empty quotes",
			rules.Bounced{Kind: rules.BounceMergeRefused},
			"GitHub refused to merge it"},
		{"update_refused without a message says no empty quotes",
			rules.Bounced{Kind: rules.BounceUpdateRefused, Base: "main", Detail: " "},
			"GitHub could not update its branch from main"},
		{"update_refused with GitHub's message",
			rules.Bounced{Kind: rules.BounceUpdateRefused, Base: "main", Detail: "Something went wrong updating the branch."},
			`GitHub could not update its branch from main ("Something went wrong updating the branch")`},
		// GitHub's merge queue removed it, or would not take it.
		{"merge_group_failed for a failed check",
			rules.Bounced{Kind: rules.BounceMergeGroupFailed, Detail: "CI_FAILURE", Base: "main"},
			"GitHub's merge queue removed it: a required check failed on its merge group (its changes merged into main together with those ahead of it in the queue)"},
		{"merge_group_failed for checks that timed out",
			rules.Bounced{Kind: rules.BounceMergeGroupFailed, Detail: "CI_TIMEOUT", Base: "main"},
			"GitHub's merge queue removed it: the required checks of its merge group (its changes merged into main together with those ahead of it in the queue) did not finish in time"},
		{"merge_group_failed for a conflict with the entries ahead",
			rules.Bounced{Kind: rules.BounceMergeGroupFailed, Detail: "MERGE_CONFLICT", Base: "main"},
			"GitHub's merge queue removed it: it conflicts with main or with a pull request ahead of it in the queue"},
		{"merge_group_failed for a reason mergegate does not know quotes GitHub",
			rules.Bounced{Kind: rules.BounceMergeGroupFailed, Detail: "GIT_TREE_INVALID", Base: "main"},
			`GitHub's merge queue removed it: GitHub says "GIT_TREE_INVALID"`},
		{"enqueue_refused with GitHub's message",
			rules.Bounced{Kind: rules.BounceEnqueueRefused, Base: "main", Detail: "Pull request Something new."},
			`GitHub's merge queue would not take it ("Pull request Something new")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.b.Because(); got != tt.because {
				t.Errorf("Because() =\n %s\nwant\n %s", got, tt.because)
			}
			for _, trigger := range []struct{ label, tail string }{{"automerge", label}, {"", autoOnly}} {
				want := lead + tt.because + "." + trigger.tail
				got := rules.BounceMessage(tt.b, bouncedSHA, trigger.label)
				if got != want {
					t.Errorf("BounceMessage(label %q) =\n %s\nwant\n %s", trigger.label, got, want)
				}
				assertOneSentence(t, got)
			}
		})
	}
}

// Removed from GitHub's merge queue by hand, the author is told so
// without being asked to fix anything.
func TestBounceMessageDequeuedByHand(t *testing.T) {
	b := rules.Bounced{Kind: rules.BounceDequeued, Detail: "MANUAL", Base: "main"}
	want := "mergegate took this pull request out of the merge queue at a1a1a1a because someone removed it from GitHub's merge queue by hand. " +
		"To queue it again, add the `automerge` label again."
	if got := rules.BounceMessage(b, bouncedSHA, "automerge"); got != want {
		t.Errorf("BounceMessage =\n %s\nwant\n %s", got, want)
	}
}

var (
	quoted = regexp.MustCompile(`"[^"]*"`)
	words  = regexp.MustCompile(`[\p{L}\p{N}'_/-]+`)
	// fullStop ends a sentence; the dot in "release-1.x" does not.
	fullStop = regexp.MustCompile(`\.( |$)`)
)

// assertOneSentence fails t unless msg reads as one plain sentence.
func assertOneSentence(t *testing.T, msg string) {
	t.Helper()
	for _, p := range sentenceProblems(msg) {
		t.Errorf("%s: %s", p, msg)
	}
}

// sentenceProblems says how msg fails to read as one plain sentence
// followed by "Once ...": a phrase said twice, a doubled full stop, a line
// break, other than exactly one full stop ending the sentence before
// "Once" and one ending the message. GitHub's own words, in quotes, are not
// counted.
func sentenceProblems(msg string) []string {
	var out []string
	if strings.Contains(msg, "..") || strings.Contains(msg, ". .") {
		out = append(out, "doubled full stop")
	}
	if strings.Contains(msg, "\n") {
		out = append(out, "a line break inside the sentence")
	}
	frame := quoted.ReplaceAllString(msg, `"…"`)
	for _, phrase := range []string{"GitHub refused", "refused to merge", "could not update"} {
		if n := strings.Count(msg, phrase); n > 1 {
			out = append(out, fmt.Sprintf("%q said %d times", phrase, n))
		}
	}
	// GitHub's own words may say "because"; the sentence around them not twice.
	for _, phrase := range []string{"because", "Once"} {
		if n := strings.Count(frame, phrase); n > 1 {
			out = append(out, fmt.Sprintf("%q said %d times", phrase, n))
		}
	}
	if strings.Contains(msg, `("")`) {
		out = append(out, "empty quotes")
	}
	before, rest, ok := strings.Cut(frame, " Once ")
	if !ok {
		return append(out, `no " Once "`)
	}
	if !strings.HasSuffix(before, ".") || len(fullStop.FindAllString(before, -1)) != 1 {
		out = append(out, `not exactly one full stop, ending the sentence, before "Once"`)
	}
	if !strings.HasSuffix(rest, " again.") || len(fullStop.FindAllString(rest, -1)) != 1 {
		out = append(out, "not ending with one full stop")
	}
	// No stutter: no run of three words outside the quotes said twice.
	w := words.FindAllString(strings.ToLower(frame), -1)
	seen := map[string]bool{}
	for i := 0; i+3 <= len(w); i++ {
		tri := strings.Join(w[i:i+3], " ")
		if seen[tri] {
			out = append(out, fmt.Sprintf("stutter %q", tri))
		}
		seen[tri] = true
	}
	return out
}

// TestSentenceProblems: the checks catch the mistakes a sentence put
// together from parts makes: a doubled phrase or full stop, a second
// sentence, a line break or an empty quote from GitHub.
func TestSentenceProblems(t *testing.T) {
	for _, bad := range []string{
		`mergegate took this pull request out of the merge queue at a1a1a1a because GitHub refused the merge: GitHub refused to merge it ("x"). Once that is fixed, add the label again.`,
		`mergegate took this pull request out of the merge queue at a1a1a1a because it failed.. Once that is fixed, add the label again.`,
		`mergegate took this pull request out of the merge queue at a1a1a1a. It failed. Once that is fixed, add the label again.`,
		`mergegate took this pull request out of the merge queue at a1a1a1a because it was refused to merge, refused to merge. Once that is fixed, add the label again.`,
		`mergegate took this pull request out of the merge queue at a1a1a1a because it failed. Once that is fixed, add the label again..`,
		"mergegate took this pull request out of the merge queue at a1a1a1a because GitHub refused to merge it (\"a\n\nb\"). Once that is fixed, add the label again.",
		`mergegate took this pull request out of the merge queue at a1a1a1a because GitHub refused to merge it (""). Once that is fixed, add the label again.`,
	} {
		if len(sentenceProblems(bad)) == 0 {
			t.Errorf("no problem found in %q", bad)
		}
	}
}
