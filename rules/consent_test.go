package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/rules"

	"github.com/mergegate/mergegate/lifecycle"
)

const oldSHA = "3333333333333333333333333333333333333333" // a head before headSHA

func entryWith(head, consent, note string) lifecycle.Item {
	it := lifecycle.Item{BaseRef: "main", ConsentSha: consent, ConsentNote: note}
	it.PRNumber, it.PRSha, it.Status = 7, head, lifecycle.StatusQueued
	return it
}

// A writer's consent is for the head it was given on: it moves along with
// pushes by writers and mergegate's own updates, never with anyone else's.
func TestConsentAfter(t *testing.T) {
	const eveNote = "@eve, who may not write to the repository, pushed new commits after it was queued"
	push := func(by string, trusted bool) rules.HeadMove {
		return rules.HeadMove{Kind: rules.MovePush, Before: headSHA, After: newSHA, By: by, Trusted: trusted}
	}
	for _, c := range []struct {
		name        string
		e           lifecycle.Item
		m           rules.HeadMove
		consent     string
		note        string
		changed     bool
		coversAfter bool
	}{
		{"a writer pushes", entryWith(newSHA, headSHA, ""), push("alice", true), newSHA, "", true, true},
		{"mergegate updates the branch", entryWith(newSHA, headSHA, ""), push("mergegate[bot]", true), newSHA, "", true, true},
		{"a fork's author pushes", entryWith(newSHA, headSHA, ""), push("eve", false), headSHA, eveNote, true, false},
		{"a writer pushes on top of eve's push", entryWith(newSHA, oldSHA, eveNote), push("alice", true), oldSHA, eveNote, false, false},
		{"eve pushes a head a writer's @mergegate queue already read", entryWith(newSHA, newSHA, ""), push("eve", false), lifecycle.NoConsent, eveNote, true, false},
		{"an older mergegate's row: for its head, withdrawn", entryWith(newSHA, "", ""), push("eve", false), lifecycle.NoConsent, eveNote, true, false},
		{"eve changes the base", entryWith(headSHA, headSHA, ""), rules.HeadMove{Kind: rules.MoveBase, Before: headSHA, After: headSHA, By: "eve"},
			lifecycle.NoConsent, "@eve, who may not write to the repository, changed its base branch after it was queued", true, false},
		{"a writer changes the base", entryWith(headSHA, headSHA, ""), rules.HeadMove{Kind: rules.MoveBase, Before: headSHA, After: headSHA, By: "alice", Trusted: true},
			headSHA, "", false, true},
		{"a writer reopens it", entryWith(headSHA, lifecycle.NoConsent, ""), rules.HeadMove{Kind: rules.MoveOpen, Before: lifecycle.NoConsent, After: headSHA, By: "alice", Trusted: true},
			headSHA, "", true, true},
		{"eve marks it ready", entryWith(headSHA, lifecycle.NoConsent, ""), rules.HeadMove{Kind: rules.MoveReady, Before: lifecycle.NoConsent, After: headSHA, By: "eve"},
			lifecycle.NoConsent, "@eve, who may not write to the repository, marked it ready for review", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			consent, note, changed := rules.ConsentAfter(c.e, c.m)
			if consent != c.consent || note != c.note || changed != c.changed {
				t.Errorf("ConsentAfter = %s %q %v, want %s %q %v", consent, note, changed, c.consent, c.note, c.changed)
			}
			e := c.e
			e.PRSha, e.ConsentSha, e.ConsentNote = c.m.After, consent, note
			if got := rules.Unconsented(e) == ""; got != c.coversAfter {
				t.Errorf("Unconsented after = %q, want covered %v", rules.Unconsented(e), c.coversAfter)
			}
		})
	}
}

// A head no writer consented to is held, in serial mode and in a train,
// whatever its checks say: it keeps its place, is never merged nor made
// ready for a group, and its check run says who pushed and what to do.
func TestDecideHoldsAnUnconsentedHead(t *testing.T) {
	note := "@eve, who may not write to the repository, pushed new commits after it was queued"
	unconsented := func(s *situation) { s.f.Entry.ConsentSha, s.f.Entry.ConsentNote = oldSHA, note }
	for _, c := range []struct {
		name string
		s    situation
	}{
		{"head, checks passed, no review required", given(unconsented)},
		{"head, a fork", given(unconsented, fork(true))},
		{"checks failed", given(unconsented, checksFailed("ci failed"))},
		{"checks pending", given(unconsented, checksPending("waiting"))},
		{"behind the head", given(unconsented, func(s *situation) { s.f.Head = false })},
		{"the pull request not read", given(unconsented, func(s *situation) { s.f.PR = nil })},
	} {
		t.Run(c.name, func(t *testing.T) {
			for mode, decide := range map[string]func(rules.Facts, rules.Policy) rules.Action{"serial": rules.Decide, "train": rules.DecideTrainEntry} {
				p := c.s.p
				if mode == "train" {
					p.Mode = rules.ModeTrain
				}
				a := decide(c.s.f, p)
				if a.Kind != rules.Block || a.Problem != rules.ProblemConsent || !strings.HasPrefix(a.Reason, rules.HeldPrefix) ||
					!strings.Contains(a.Reason, note) || !strings.Contains(a.Reason, "`@mergegate queue`") {
					t.Errorf("%s: %+v, want held for a writer's consent", mode, a)
				}
			}
		})
	}
	// Consent for the head, or a row an older mergegate wrote: merges.
	for _, consent := range []string{headSHA, ""} {
		s := given(func(s *situation) { s.f.Entry.ConsentSha = consent })
		if a := rules.Decide(s.f, s.p); a.Kind != rules.Merge {
			t.Errorf("consent %q: %+v, want merge", consent, a)
		}
	}
	// A head GitHub reports newer than the entry's is gated again first.
	s := given(unconsented, onPR(func(pr *lifecycle.PR) { pr.HeadSHA = newSHA }))
	if a := rules.Decide(s.f, s.p); a.Kind != rules.Regate {
		t.Errorf("new head on GitHub: %+v, want regate", a)
	}
}

// A member held for consent leaves its group (it is held).
func TestDecideTrainDropsAnUnconsentedMember(t *testing.T) {
	it := entryWith(headSHA, oldSHA, "")
	it.Status, it.GateReason = lifecycle.StatusBlocked, rules.HeldPrefix+rules.Unconsented(it)
	g := lifecycle.Group{ID: 1, Base: "main", State: lifecycle.GroupTesting, Parent: "tip", Head: "h", PRs: []lifecycle.GroupPR{{Number: 7, SHA: headSHA}}}
	a := rules.DecideTrain(rules.TrainFacts{Base: "main", Tip: "tip", Groups: []lifecycle.Group{g}, Entries: map[int]lifecycle.Item{7: it}},
		rules.Policy{Mode: rules.ModeTrain})
	if a.Kind != rules.TrainDrop || len(a.PRs) != 1 || a.PRs[0].Number != 7 {
		t.Errorf("DecideTrain = %+v, want #7 dropped", a)
	}
}

// A writer's `@mergegate queue` consents to a head they could have seen:
// one mergegate knew before the comment was written, or, carried out
// within QueueLag of it, one mergegate has not learnt of yet.
func TestQueueConsents(t *testing.T) {
	wrote := joined.Add(time.Hour)
	known := func(head string, at time.Time, consent string) *lifecycle.Item {
		it := entryWith(head, consent, "")
		it.HeadAt = at.UnixMilli()
		return &it
	}
	seen := func(at time.Time, trusted bool) *rules.Seen { return &rules.Seen{At: at, Trusted: trusted} }
	for _, c := range []struct {
		name string
		e    *lifecycle.Item
		head string
		seen *rules.Seen
		made time.Time
		now  time.Time
		want bool
	}{
		{"not queued, carried out at once", nil, newSHA, nil, wrote, wrote.Add(time.Second), true},
		{"not queued, a head seen before the comment, carried out hours later", nil, newSHA, seen(wrote.Add(-time.Minute), false), wrote, wrote.Add(3 * time.Hour), true},
		{"not queued, a head seen after the comment, moved by someone who may not write: pushed after it, maybe", nil, newSHA, seen(wrote.Add(10*time.Second), false), wrote, wrote.Add(20 * time.Second), false},
		{"not queued, a head seen within ClockSkew before the comment, moved by someone who may not write", nil, newSHA, seen(wrote.Add(-rules.ClockSkew/2), false), wrote, wrote.Add(time.Second), false},
		{"not queued, a head seen after the comment, moved by a writer", nil, newSHA, seen(wrote.Add(10*time.Second), true), wrote, wrote.Add(20 * time.Second), true},
		{"not queued, carried out QueueLag later", nil, newSHA, nil, wrote, wrote.Add(rules.QueueLag), true},
		{"not queued, carried out later than QueueLag: a push since cannot be told", nil, newSHA, nil, wrote, wrote.Add(rules.QueueLag + time.Second), false},
		{"a head known a minute before the comment, carried out hours later", known(newSHA, wrote.Add(-time.Minute), oldSHA), newSHA, nil, wrote, wrote.Add(3 * time.Hour), true},
		{"a head learnt of after the comment: pushed after it, maybe", known(newSHA, wrote.Add(time.Minute), oldSHA), newSHA, nil, wrote, wrote.Add(2 * time.Minute), false},
		{"a head learnt of within ClockSkew before the comment", known(newSHA, wrote.Add(-rules.ClockSkew/2), oldSHA), newSHA, nil, wrote, wrote.Add(time.Second), false},
		{"a head learnt of ClockSkew before the comment", known(newSHA, wrote.Add(-rules.ClockSkew), oldSHA), newSHA, nil, wrote, wrote.Add(time.Second), true},
		{"a head the consent covers already: nothing to give", known(newSHA, wrote.Add(time.Minute), newSHA), newSHA, nil, wrote, wrote.Add(time.Hour), true},
		{"a head the entry does not know yet, at once (its push's delivery withdraws it)", known(oldSHA, wrote.Add(-time.Hour), oldSHA), newSHA, nil, wrote, wrote.Add(time.Second), true},
		{"a head the entry does not know yet, late", known(oldSHA, wrote.Add(-time.Hour), oldSHA), newSHA, nil, wrote, wrote.Add(time.Hour), false},
		{"no time kept (an earlier mergegate's command)", known(newSHA, wrote, oldSHA), newSHA, nil, time.Time{}, wrote.Add(time.Hour), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := rules.QueueConsents(c.e, c.head, c.seen, c.made, c.now); got != c.want {
				t.Errorf("QueueConsents = %v, want %v", got, c.want)
			}
		})
	}
}
