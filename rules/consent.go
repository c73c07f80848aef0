package rules

import (
	"fmt"
	"time"

	"github.com/mergegate/mergegate/lifecycle"
)

// A writer's consent (the trigger label, @mergegate queue, GitHub
// auto-merge enabled) is for the head it was given on, as GitHub's own
// auto-merge is: "if someone who does not have write permissions to the
// repository pushes new changes to the head branch or switches the base
// branch of the pull request, auto-merge will be disabled"
// (docs.github.com, "Automatically merging a pull request"). An entry
// whose consent does not cover its head is held (Decide): it keeps its
// place, never merges and never joins a merge train group, until a writer
// consents again.

// ProblemConsent is the Problem of the hold of an entry whose head no
// writer consented to.
const ProblemConsent = "consent"

// Kinds of a HeadMove.
const (
	MovePush  = "push"     // synchronize: new commits
	MoveBase  = "base"     // edited: the base branch changed
	MoveOpen  = "reopened" // reopened: back in the queue, on whatever head it has
	MoveReady = "ready"    // ready_for_review: the same
)

// HeadMove is what moved a pull request's head, or brought it back to the
// queue or onto a new base, as a webhook told it.
type HeadMove struct {
	Kind string
	// Before and After are the heads before and after (a push's before
	// and after; a base change's head, twice; a pull request brought back:
	// lifecycle.NoConsent, then its head).
	Before, After string
	By            string // the delivery's sender
	// Trusted: By may write to the repository, or is mergegate itself (a
	// branch it updated carries the consent it had).
	Trusted bool
}

// ConsentAfter returns what an entry's consent covers after m, and why it
// does not cover m.After (note; "" when it does). changed is false when m
// changes nothing.
//
//   - By someone trusted, the consent moves along: from Before (what it
//     covered) to After. A consent already lost is not given back by a
//     writer's push: a writer consents by the label or @mergegate queue.
//   - By anyone else, the consent stays where it was; if it already
//     covered After (a writer's @mergegate queue read the head after the
//     push, before its delivery came), it is withdrawn.
func ConsentAfter(e lifecycle.Item, m HeadMove) (consent, note string, changed bool) {
	cur := e.ConsentSha
	if cur == "" {
		cur = e.PRSha // written by an older mergegate: its head
	}
	if m.Trusted {
		if cur == m.Before && cur != m.After {
			return m.After, "", true
		}
		return e.ConsentSha, e.ConsentNote, false
	}
	note = fmt.Sprintf("@%s, who may not write to the repository, %s", m.By, moveWords(m.Kind))
	if cur == m.After {
		cur = lifecycle.NoConsent
	}
	return cur, note, cur != e.ConsentSha || note != e.ConsentNote
}

func moveWords(kind string) string {
	switch kind {
	case MoveBase:
		return "changed its base branch after it was queued"
	case MoveOpen:
		return "reopened it"
	case MoveReady:
		return "marked it ready for review"
	}
	return "pushed new commits after it was queued"
}

// Unconsented says why no writer's consent covers e's head ("" when one
// does): what its check run says while it is held.
func Unconsented(e lifecycle.Item) string {
	if e.ConsentSha == "" || e.ConsentSha == e.PRSha {
		return ""
	}
	why := e.ConsentNote
	if why == "" {
		why = "its head changed after it was queued, and mergegate has not seen who pushed"
	}
	return "no writer consented to this head: " + why + "; someone who may write must comment `@mergegate queue` (or add the trigger label again) to let it merge"
}

// QueueLag is how long after a writer wrote `@mergegate queue` the command
// may still consent to a head mergegate did not know before the comment (a
// pull request not queued yet, or a push whose delivery has not come):
// later than that, a push made after the comment cannot be told from one
// made before it. ClockSkew is what GitHub's clock (the comment's time) and
// mergegate's (when it learnt of a head) may differ by.
const (
	QueueLag  = time.Minute
	ClockSkew = 5 * time.Second
)

// Seen is what mergegate keeps of a head of a pull request not in the
// queue that a delivery told of (leasedo.HeadSeen): when it learnt of it,
// and whether whoever moved it may write (or is the command's own writer,
// or mergegate itself: their moves carry a consent along, ConsentAfter).
type Seen struct {
	At      time.Time
	Trusted bool
}

// QueueConsents reports whether a writer's `@mergegate queue`, written at
// made (GitHub's time; zero: not known), consents to head, the pull
// request's head when the command is carried out at now; e is its entry,
// nil when it is not queued, and seen what mergegate kept of head when it
// is not (nil: nothing). The command reads the head when it is carried
// out, and a comment's delivery can come after a push that followed it (a
// retry, a redelivery after an outage): its consent is for a head the
// writer could have seen.
//
//   - A head the entry's consent already covers: nothing to give.
//   - A head mergegate knew (the entry's, since HeadAt; one not queued,
//     since seen.At) before the comment was written: consented, however
//     late the command is carried out.
//   - A head mergegate learnt of after the comment: not consented, unless
//     (not queued) it was moved by someone trusted (seen.Trusted), whose
//     move a consent follows.
//   - A head mergegate does not know (not queued and not seen, or its
//     push's delivery not come): consented when the command is carried
//     out within QueueLag of the comment (a later push by someone who may
//     not write then withdraws it, ConsentAfter); not later.
func QueueConsents(e *lifecycle.Item, head string, seen *Seen, made, now time.Time) bool {
	switch {
	case made.IsZero():
		return true // a command stored by an earlier mergegate
	case e != nil && e.PRSha == head && (e.ConsentSha == head || e.ConsentSha == ""):
		return true
	case e != nil && e.PRSha == head && e.HeadAt > 0:
		return KnownBefore(time.UnixMilli(e.HeadAt), made)
	case e == nil && seen != nil:
		return KnownBefore(seen.At, made) || seen.Trusted
	}
	return now.Sub(made) <= QueueLag
}

// KnownBefore reports whether a head mergegate learnt of at was known
// before a comment written at made (ClockSkew apart at least): its writer
// could have seen it.
func KnownBefore(at, made time.Time) bool { return !at.Add(ClockSkew).After(made) }
