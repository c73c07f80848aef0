package rules_test

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/rules"

	"github.com/mergegate/mergegate/lifecycle"
)

var (
	trainNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	passed   = lifecycle.Verdict{Result: lifecycle.GateSuccess, Reason: "all required checks passed"}
	failing  = lifecycle.Verdict{Result: lifecycle.GateFailure, Reason: `required check "ci" failed`}
	pending  = lifecycle.Verdict{Result: lifecycle.GatePending, Reason: `waiting for "ci"`}
)

func member(n int) lifecycle.GroupPR { return lifecycle.GroupPR{Number: n, SHA: sha(n)} }

func sha(n int) string { return strings.Repeat(string(rune('a'+n%26)), 40) }

func members(ns ...int) []lifecycle.GroupPR {
	out := make([]lifecycle.GroupPR, len(ns))
	for i, n := range ns {
		out[i] = member(n)
	}
	return out
}

func group(id int64, state, parent, head string, ns ...int) lifecycle.Group {
	return lifecycle.Group{ID: id, Base: "main", Seq: int(id), State: state, PRs: members(ns...), Parent: parent, Head: head,
		BuiltAt: trainNow.Add(-10 * time.Minute).UnixMilli()}
}

// trainFacts: every member and every ready number is a gate-passed entry.
func trainFacts(groups []lifecycle.Group, gates []lifecycle.Verdict, ready ...int) rules.TrainFacts {
	f := rules.TrainFacts{Base: "main", Tip: "tip", Groups: groups, Gates: gates, Entries: map[int]lifecycle.Item{}, Now: trainNow}
	add := func(n int) lifecycle.Item {
		it := lifecycle.Item{Entry: lifecycle.Entry{PRNumber: n, PRSha: sha(n), Status: lifecycle.StatusGatePassed}, BaseRef: "main"}
		f.Entries[n] = it
		return it
	}
	for _, g := range groups {
		for _, m := range g.PRs {
			add(m.Number)
		}
	}
	for _, n := range ready {
		f.Ready = append(f.Ready, add(n))
	}
	return f
}

func trainPolicy(mut ...func(*rules.Policy)) rules.Policy {
	p := rules.Policy{Mode: rules.ModeTrain, CheckTimeout: time.Hour}
	for _, m := range mut {
		m(&p)
	}
	return p
}

func TestDecideTrain(t *testing.T) {
	frozen := func(p *rules.Policy) { p.Frozen, p.FreezeMessage = true, "release" }
	retries := func(p *rules.Policy) { p.Train.Retries = 1 }
	batch2 := func(p *rules.Policy) { p.Train.BatchSize = 2 }
	parallel1 := func(p *rules.Policy) { p.Train.Parallel = 1 }
	tests := []struct {
		name  string
		facts func() rules.TrainFacts
		p     rules.Policy
		want  rules.TrainAction
	}{
		{
			name:  "nothing ready: wait",
			facts: func() rules.TrainFacts { return trainFacts(nil, nil) },
			p:     trainPolicy(),
			want:  rules.TrainAction{Kind: rules.TrainWait},
		},
		{
			name:  "ready entries form a group of at most batch_size, in queue order",
			facts: func() rules.TrainFacts { return trainFacts(nil, nil, 3, 1, 2) },
			p:     trainPolicy(batch2),
			want:  rules.TrainAction{Kind: rules.TrainPlan, PRs: members(3, 1), Reason: "pull requests ready"},
		},
		{
			name: "a planned first group is built on the tip",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPlanned, "", "", 1, 2)}, nil)
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBuild, Group: group(1, lifecycle.GroupPlanned, "", "", 1, 2), Parent: "tip", Reason: "room in the train"},
		},
		{
			name: "the second group is built on the first's head",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupPlanned, "", "", 2)},
					[]lifecycle.Verdict{pending})
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBuild, Group: group(2, lifecycle.GroupPlanned, "", "", 2), Parent: "g1", Reason: "room in the train"},
		},
		{
			name: "no more than parallel groups are built",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupPlanned, "", "", 2)},
					[]lifecycle.Verdict{pending})
			},
			p:    trainPolicy(parallel1),
			want: rules.TrainAction{Kind: rules.TrainWait},
		},
		{
			name: "room for another group: the ready entries behind form it",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, []lifecycle.Verdict{pending}, 5, 6)
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainPlan, PRs: members(5, 6), Reason: "pull requests ready"},
		},
		{
			name: "a group interrupted while building is built again",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupBuilding, "tip", "", 1)}, nil)
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBuild, Group: group(1, lifecycle.GroupBuilding, "tip", "", 1), Parent: "tip", Reason: "building"},
		},
		{
			name: "checks passed: the group passed",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, []lifecycle.Verdict{passed})
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainPass, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1), Reason: passed.Reason},
		},
		{
			name: "the first group passed: it lands",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPassed, "tip", "g1", 1)}, nil)
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(1, lifecycle.GroupPassed, "tip", "g1", 1), Landing: rules.LandFastForward, Reason: "its checks passed"},
		},
		{
			name: "a frozen base lands nothing",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPassed, "tip", "g1", 1)}, nil)
			},
			p:    trainPolicy(frozen),
			want: rules.TrainAction{Kind: rules.TrainWait, Reason: "frozen: release"},
		},
		{
			name: "with replay landing a passed group behind one still testing waits for it",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupPassed, "g1", "g2", 2)},
					[]lifecycle.Verdict{pending})
			},
			p:    trainPolicy(func(p *rules.Policy) { p.Train.Landing = rules.LandReplay }),
			want: rules.TrainAction{Kind: rules.TrainWait},
		},
		{
			name: "a landing interrupted by a restart is carried on, whatever its members' entries say",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupLanding, "tip", "g1", 1)}, nil)
				delete(f.Entries, 1)
				f.Tip = "g1"
				return f
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(1, lifecycle.GroupLanding, "tip", "g1", 1), Landing: rules.LandFastForward, Reason: "landing"},
		},
		{
			name: "a failed group of several is split into its members",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2, 3)}, []lifecycle.Verdict{failing})
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainSplit, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2, 3),
				Reason: `failed (required check "ci" failed); testing each of its pull requests at its step to find the cause`},
		},
		{
			name: "the pieces of a split group are built whatever parallel says",
			facts: func() rules.TrainFacts {
				p1, p2 := group(2, lifecycle.GroupPlanned, "", "", 1), group(3, lifecycle.GroupPlanned, "", "", 2)
				last := group(1, lifecycle.GroupTesting, "s2", "g1", 3)
				p1.Split, p2.Split, last.Split = true, true, true
				return trainFacts([]lifecycle.Group{p1, p2, last, group(4, lifecycle.GroupTesting, "g1", "g4", 5), group(5, lifecycle.GroupTesting, "g4", "g5", 6)},
					[]lifecycle.Verdict{{}, {}, failing, pending, pending})
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBuild, Group: func() lifecycle.Group {
				g := group(2, lifecycle.GroupPlanned, "", "", 1)
				g.Split = true
				return g
			}(), Parent: "tip", Reason: "room in the train"},
		},
		{
			name: "a group is not built behind one whose checks failed: it is built once the culprit is out",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2),
					group(3, lifecycle.GroupPlanned, "", "", 3)}, []lifecycle.Verdict{pending, failing, {}})
			},
			p:    trainPolicy(func(p *rules.Policy) { p.Train.Parallel = 4 }),
			want: rules.TrainAction{Kind: rules.TrainWait},
		},
		{
			name: "pieces of a split leave room for a new group",
			facts: func() rules.TrainFacts {
				p1 := group(2, lifecycle.GroupTesting, "tip", "s1", 1)
				last := group(1, lifecycle.GroupTesting, "s1", "g1", 2)
				p1.Split, last.Split = true, true
				return trainFacts([]lifecycle.Group{p1, last, group(3, lifecycle.GroupPlanned, "", "", 3)}, []lifecycle.Verdict{pending, failing, {}}, 4)
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainPlan, PRs: members(4), Reason: "pull requests ready"},
		},
		{
			name: "retries: a failed group runs again first",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2)}, []lifecycle.Verdict{failing})
			},
			p:    trainPolicy(retries),
			want: rules.TrainAction{Kind: rules.TrainRetry, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2), Reason: `failed (required check "ci" failed); running it again`},
		},
		{
			name: "a failed group of one bounces its pull request, naming what it was merged onto",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPassed, "tip", "g1", 4, 5), group(2, lifecycle.GroupTesting, "g1", "g2", 7)},
					[]lifecycle.Verdict{{}, failing})
			},
			p: trainPolicy(frozen),
			want: rules.TrainAction{Kind: rules.TrainBounce, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 7), Culprit: member(7),
				Reason:  failing.Reason,
				Bounced: rules.Bounced{Kind: rules.BounceTrainFailure, Detail: failing.Reason, Base: "main", At: "g1", Ahead: []int{4, 5}}},
		},
		{
			name: "a failed group of one names what landed on the base since its own checks passed",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(2, lifecycle.GroupTesting, "tip", "g2", 12)}, []lifecycle.Verdict{failing})
				it := f.Entries[12]
				passedAt := trainNow.Add(-30 * time.Minute).UnixMilli()
				it.GateResultAt = &passedAt
				f.Entries[12] = it
				f.Landed = lifecycle.Landed{Tip: "tip", Tested: "tip", Recent: []lifecycle.LandedPR{
					{Number: 3, At: passedAt - 1}, {Number: 9, At: passedAt + 1}, {Number: 10, At: passedAt + 2}}}
				return f
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBounce, Group: group(2, lifecycle.GroupTesting, "tip", "g2", 12), Culprit: member(12),
				Reason:  failing.Reason,
				Bounced: rules.Bounced{Kind: rules.BounceTrainFailure, Detail: failing.Reason, Base: "main", At: "tip", Since: []int{9, 10}}},
		},
		{
			name: "a failure behind a group not yet passed waits: that group may be the cause",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2)},
					[]lifecycle.Verdict{pending, failing})
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainWait},
		},
		{
			name: "checks that never finish count as failed after check_timeout",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, []lifecycle.Verdict{pending})
				f.Now = trainNow.Add(time.Hour)
				return f
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainBounce, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1), Culprit: member(1),
				Reason:  "its checks did not finish within 1h",
				Bounced: rules.Bounced{Kind: rules.BounceTrainFailure, Detail: "its checks did not finish within 1h", Base: "main", At: "tip"}},
		},
		{
			name: "a member with new commits is dropped from its group",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2)}, []lifecycle.Verdict{pending})
				it := f.Entries[2]
				it.PRSha = "new"
				f.Entries[2] = it
				return f
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainDrop, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2), PRs: members(2), Reason: "#2 has new commits"},
		},
		{
			name: "a member held by a blocking label is dropped",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPlanned, "", "", 1)}, nil)
				it := f.Entries[1]
				it.GateReason = rules.HeldPrefix + "labeled do-not-merge"
				f.Entries[1] = it
				return f
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainDrop, Group: group(1, lifecycle.GroupPlanned, "", "", 1), PRs: members(1), Reason: "#1 is held: labeled do-not-merge"},
		},
		{
			name: "the base moved under the train: rebuild",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "old", "g1", 1)}, []lifecycle.Verdict{passed})
				f.Tip = "moved"
				return f
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainRebase, Reason: "main moved to moved outside mergegate"},
		},
		{
			name: "after a replay landing the base's new tip has the tested tree: not a move",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(2, lifecycle.GroupTesting, "g1", "g2", 2)}, []lifecycle.Verdict{passed})
				f.Tip, f.Landed = "replayed", lifecycle.Landed{Tip: "replayed", Tested: "g1"}
				return f
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainPass, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 2), Reason: passed.Reason},
		},
		{
			name: "skip intermediate results: a group that passed on a group still testing lands both at its commit",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2), group(2, lifecycle.GroupTesting, "g1", "g2", 3, 4)},
					[]lifecycle.Verdict{pending, passed})
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 3, 4),
				Through: []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2)}, Landing: rules.LandFastForward,
				Reason: "its checks passed on the pull requests ahead of it (#1, #2): they land with it"},
		},
		{
			name: "skip intermediate results: a failed group ahead whose successor passed is not split, it lands",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2),
					group(3, lifecycle.GroupTesting, "g2", "g3", 3)}, []lifecycle.Verdict{failing, passed, pending})
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 2),
				Through: []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, Landing: rules.LandFastForward,
				Reason: "its checks passed on the pull requests ahead of it (#1): they land with it"},
		},
		{
			name: "skip intermediate results: the last group that passed in the chain proves all ahead",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupPassed, "g1", "g2", 2),
					group(3, lifecycle.GroupTesting, "g2", "g3", 3), group(4, lifecycle.GroupTesting, "g3", "g4", 4)}, []lifecycle.Verdict{pending, {}, passed, pending})
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(3, lifecycle.GroupTesting, "g2", "g3", 3),
				Through: []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupPassed, "g1", "g2", 2)}, Landing: rules.LandFastForward,
				Reason: "its checks passed on the pull requests ahead of it (#1, #2): they land with it"},
		},
		{
			name: "skip intermediate results: a group not built on the one ahead proves nothing",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "old", "g2", 2)},
					[]lifecycle.Verdict{pending, passed})
			},
			p:    trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainPass, Group: group(2, lifecycle.GroupTesting, "old", "g2", 2), Reason: passed.Reason},
		},
		{
			name: "skip intermediate results: not with replay landing (each group's tree is compared after its merges)",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2)},
					[]lifecycle.Verdict{pending, passed})
			},
			p:    trainPolicy(func(p *rules.Policy) { p.Train.Landing = rules.LandReplay }),
			want: rules.TrainAction{Kind: rules.TrainPass, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 2), Reason: passed.Reason},
		},
		{
			name: "skip intermediate results: not while the base is frozen",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2)},
					[]lifecycle.Verdict{pending, passed})
			},
			p:    trainPolicy(frozen),
			want: rules.TrainAction{Kind: rules.TrainPass, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 2), Reason: passed.Reason},
		},
		{
			name: "a group landing through the groups ahead of it goes on landing them all; their members are not dropped",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupLanding, "g1", "g2", 2)},
					[]lifecycle.Verdict{pending, {}})
				delete(f.Entries, 1)
				f.Tip = "g2"
				return f
			},
			p: trainPolicy(),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(2, lifecycle.GroupLanding, "g1", "g2", 2),
				Through: []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, Landing: rules.LandFastForward, Reason: "landing"},
		},
		{
			name: "a base that is no longer a train disbands its groups",
			facts: func() rules.TrainFacts {
				return trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, nil)
			},
			p:    rules.Policy{},
			want: rules.TrainAction{Kind: rules.TrainDisband, Reason: "the base is no longer a merge train"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rules.DecideTrain(tt.facts(), tt.p)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecideTrain:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}

// A failing group finds its culprit in one round and lets the others go
// on: each member is tested at its step of the group's build, and the
// group behind waits for the culprit to be out, then is built once.
// Played here through DecideTrain alone, with a CI that fails any commit
// containing #3.
func TestDecideTrainFindsTheCulpritInOneRound(t *testing.T) {
	p := trainPolicy()
	groups := []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2, 3, 4), group(2, lifecycle.GroupTesting, "g1", "g2", 5, 6)}
	contains := map[string][]int{"tip": nil, "g1": {1, 2, 3, 4}, "g2": {1, 2, 3, 4, 5, 6}}
	var bounced []int
	landed := []int{}
	next, builds, rounds := int64(10), map[int]int{}, 0
	for step := 0; step < 100; step++ {
		f := trainFacts(groups, nil)
		for _, g := range groups {
			gate := passed
			if g.State == lifecycle.GroupTesting {
				for _, n := range contains[g.Head] {
					if n == 3 {
						gate = failing
					}
				}
			}
			f.Gates = append(f.Gates, gate)
		}
		a := rules.DecideTrain(f, p)
		idx := -1
		for i, g := range groups {
			if g.ID == a.Group.ID {
				idx = i
			}
		}
		switch a.Kind {
		case rules.TrainWait:
			if len(groups) != 0 {
				t.Fatalf("waits with groups left: %+v", groups)
			}
			if !reflect.DeepEqual(bounced, []int{3}) || !reflect.DeepEqual(landed, []int{1, 2, 4, 5, 6}) {
				t.Fatalf("bounced %v landed %v, want [3] and [1 2 4 5 6]", bounced, landed)
			}
			// #1, #2 and #3 at their steps of the first group's build,
			// #4 on the base without #3, the group behind once.
			if want := map[int]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}; !reflect.DeepEqual(builds, want) {
				t.Errorf("builds per pull request %v, want %v", builds, want)
			}
			if rounds != 1 {
				t.Errorf("%d splits, want 1", rounds)
			}
			return
		case rules.TrainBuild:
			g := &groups[idx]
			g.State, g.Parent, g.Head = lifecycle.GroupTesting, a.Parent, "h"+strings.Repeat("x", step)
			if g.Split {
				g.Head = "step" + strconv.Itoa(g.Numbers()[0])
			}
			contains[g.Head] = append(append([]int{}, contains[a.Parent]...), g.Numbers()...)
			for _, n := range g.Numbers() {
				builds[n]++
			}
		case rules.TrainPass:
			groups[idx].State = lifecycle.GroupPassed
		case rules.TrainLand:
			for _, t := range a.Through {
				landed = append(landed, t.Numbers()...)
			}
			landed = append(landed, a.Group.Numbers()...)
			contains["tip"] = contains[a.Group.Head]
			groups = groups[idx+1:]
			if len(groups) > 0 {
				groups[0].Parent = "tip"
			}
		case rules.TrainSplit:
			rounds++
			// The engine pushes each piece at its step of g's build; g
			// keeps its last member, built on the step before.
			g := groups[idx]
			var pieces []lifecycle.Group
			for _, m := range g.PRs[:len(g.PRs)-1] {
				next++
				pieces = append(pieces, lifecycle.Group{ID: next, Base: "main", State: lifecycle.GroupPlanned, PRs: []lifecycle.GroupPR{m}, Split: true})
			}
			last := g
			last.PRs, last.Split = g.PRs[len(g.PRs)-1:], true
			last.Parent = "step" + strconv.Itoa(g.PRs[len(g.PRs)-2].Number)
			rest := append([]lifecycle.Group{}, groups[idx+1:]...)
			for i := range rest {
				rest[i].State, rest[i].Head = lifecycle.GroupPlanned, ""
			}
			groups = append(append(append(groups[:idx:idx], pieces...), last), rest...)
		case rules.TrainBounce:
			bounced = append(bounced, a.Culprit.Number)
			rest := append([]lifecycle.Group{}, groups[idx+1:]...)
			for i := range rest {
				rest[i].State, rest[i].Head = lifecycle.GroupPlanned, ""
			}
			groups = append(groups[:idx:idx], rest...)
		default:
			t.Fatalf("step %d: unexpected %v", step, a.Kind)
		}
	}
	t.Fatal("did not settle in 100 steps")
}

func TestDecideTrainEntry(t *testing.T) {
	f := rules.Facts{Entry: lifecycle.Item{Entry: lifecycle.Entry{PRNumber: 1, PRSha: sha(1), Status: lifecycle.StatusQueued}, BaseRef: "main"},
		Gate: passed, Now: trainNow}
	if a := rules.DecideTrainEntry(f, trainPolicy()); a.Kind != rules.Wait || a.Status != lifecycle.StatusGatePassed || a.Reason != rules.ReadyReason {
		t.Errorf("checks passed, behind the head: %+v, want ready for the train", a)
	}
	f.Rules.Reviews = 1
	f.Reviews = &lifecycle.Reviews{}
	if a := rules.DecideTrainEntry(f, trainPolicy()); a.Kind != rules.Wait || a.Reason == rules.ReadyReason {
		t.Errorf("approval missing: %+v, want a wait for the review", a)
	}
	f.Gate = failing
	if a := rules.DecideTrainEntry(f, trainPolicy()); a.Kind != rules.Bounce {
		t.Errorf("own checks failed: %+v, want bounce", a)
	}
}

func TestTrainBounceMessage(t *testing.T) {
	b := rules.Bounced{Kind: rules.BounceTrainFailure, Detail: `required check "ci" failed`, Base: "main", At: strings.Repeat("ab", 20), Ahead: []int{4, 5}}
	got := rules.BounceMessage(b, strings.Repeat("cd", 20), "automerge")
	want := "mergegate took this pull request out of the merge queue at cdcdcdc because it passed its own checks but failed merged together with main and the pull requests ahead of it (#4 and #5) at abababa: required check \"ci\" failed. Once that is fixed, add the `automerge` label again."
	if got != want {
		t.Errorf("BounceMessage:\n got  %s\n want %s", got, want)
	}
	// The pull requests that landed since its own checks passed: one of
	// them breaks the base with it (the latest twenty named).
	b = rules.Bounced{Kind: rules.BounceTrainFailure, Detail: `required check "ci" failed`, Base: "main", At: strings.Repeat("ab", 20),
		Since: []int{20, 19, 17, 4, 2, 3, 1, 11, 7, 8, 9, 10, 13}}
	got = rules.BounceMessage(b, strings.Repeat("cd", 20), "automerge")
	want = "mergegate took this pull request out of the merge queue at cdcdcdc because it passed its own checks but failed merged together with main at abababa: " +
		"required check \"ci\" failed; since its own checks passed, #20, #19, #17, #4, #2, #3, #1, #11, #7, #8, #9, #10 and #13 landed on main, " +
		"and it breaks the base together with one of them. Once that is fixed, add the `automerge` label again."
	if got != want {
		t.Errorf("BounceMessage with Since:\n got  %s\n want %s", got, want)
	}
	// More than twenty: the earlier ones are counted, not named.
	var many []int
	for n := 1; n <= 22; n++ {
		many = append(many, n)
	}
	b.Since = many
	got = rules.BounceMessage(b, strings.Repeat("cd", 20), "automerge")
	if !strings.Contains(got, "since its own checks passed, 2 earlier pull requests, #3, #4, ") || !strings.Contains(got, "#21 and #22 landed on main") {
		t.Errorf("BounceMessage with 22 since:\n got  %s", got)
	}
	// A train that speculates counts from when it was queued at its head.
	b.Since, b.SinceQueued = []int{9}, true
	if got = rules.BounceMessage(b, strings.Repeat("cd", 20), "automerge"); !strings.Contains(got, "; since it was queued at this commit, #9 landed on main, and it breaks") {
		t.Errorf("BounceMessage with SinceQueued:\n got  %s", got)
	}
}

// Groups follow the queue (batch_wait): a ready entry behind one that
// still runs its own checks waits for it until batch_wait has passed
// since it became ready; the ready entries ahead of one that may go go
// with it.
func TestDecideTrainBatchWait(t *testing.T) {
	at := func(d time.Duration) *int64 { ms := trainNow.Add(-d).UnixMilli(); return &ms }
	// facts: ready numbers became ready readyAgo before now; pending
	// numbers still run their own checks.
	facts := func(ready map[int]time.Duration, order []int, pending ...int) rules.TrainFacts {
		f := trainFacts(nil, nil)
		for _, n := range order {
			if ago, ok := ready[n]; ok {
				it := lifecycle.Item{Entry: lifecycle.Entry{PRNumber: n, PRSha: sha(n), Status: lifecycle.StatusGatePassed, GateResultAt: at(ago)}, BaseRef: "main"}
				f.Entries[n], f.Ready = it, append(f.Ready, it)
			}
		}
		for _, n := range pending {
			it := lifecycle.Item{Entry: lifecycle.Entry{PRNumber: n, PRSha: sha(n), Status: lifecycle.StatusEvaluating}, BaseRef: "main"}
			f.Entries[n], f.Pending = it, append(f.Pending, it)
		}
		return f
	}
	plan := func(ns ...int) rules.TrainAction {
		return rules.TrainAction{Kind: rules.TrainPlan, PRs: members(ns...), Reason: "pull requests ready"}
	}
	wait := func(after time.Duration) rules.TrainAction {
		return rules.TrainAction{Kind: rules.TrainWait, Reason: "waiting for #9 ahead in the queue to finish its checks (" + after.String() + ")"}
	}
	fill := func(after time.Duration) rules.TrainAction {
		return rules.TrainAction{Kind: rules.TrainWait, Reason: "waiting for #9 to finish its checks: it would join the group (" + after.String() + ")"}
	}
	noWait := func(p *rules.Policy) { p.Train.BatchWait = rules.NoBatchWait }
	short := func(p *rules.Policy) { p.Train.BatchWait = 30 * time.Second }
	five := func(p *rules.Policy) { p.Train.BatchWait = 5 * time.Minute }
	tests := []struct {
		name  string
		facts rules.TrainFacts
		p     rules.Policy
		want  rules.TrainAction
	}{
		{
			name:  "the default is 10m",
			facts: facts(map[int]time.Duration{12: time.Minute}, []int{12}, 9),
			p:     trainPolicy(),
			want:  wait(9 * time.Minute),
		},
		{
			name:  "#12 ready before #9, which still runs its checks: the group waits for #9 (batch_wait 5m)",
			facts: facts(map[int]time.Duration{12: time.Minute}, []int{12}, 9),
			p:     trainPolicy(five),
			want:  wait(4 * time.Minute),
		},
		{
			name:  "once batch_wait passed since #12 became ready, it goes without #9",
			facts: facts(map[int]time.Duration{12: 5 * time.Minute}, []int{12}, 9),
			p:     trainPolicy(five),
			want:  plan(12),
		},
		{
			name: "ready entries ahead of the one still testing go at once; those behind it wait",
			facts: facts(map[int]time.Duration{1: time.Minute, 2: time.Minute, 3: time.Minute, 4: time.Minute, 12: time.Minute, 13: time.Minute},
				[]int{1, 2, 3, 4, 12, 13}, 9),
			p:    trainPolicy(five),
			want: plan(1, 2, 3, 4),
		},
		{
			name: "an entry that may go takes the ready ones ahead of it along, in queue order",
			// #13 waited its batch_wait; #12, ahead of it, only a minute.
			facts: facts(map[int]time.Duration{12: time.Minute, 13: 6 * time.Minute}, []int{12, 13}, 9),
			p:     trainPolicy(five),
			want:  plan(12, 13),
		},
		{
			name:  "the wait is the shortest of those waiting",
			facts: facts(map[int]time.Duration{12: time.Minute, 13: 3 * time.Minute}, []int{12, 13}, 9),
			p:     trainPolicy(five),
			want:  wait(2 * time.Minute),
		},
		{
			name:  "batch_wait: 30s",
			facts: facts(map[int]time.Duration{12: 10 * time.Second}, []int{12}, 9),
			p:     trainPolicy(short),
			want:  wait(20 * time.Second),
		},
		{
			name:  "batch_wait: 0 takes whoever is ready",
			facts: facts(map[int]time.Duration{12: 0}, []int{12}, 9),
			p:     trainPolicy(noWait),
			want:  plan(12),
		},
		{
			name:  "nothing still testing: a group short of batch_size goes at once",
			facts: facts(map[int]time.Duration{3: 0, 4: 0}, []int{3, 4}),
			p:     trainPolicy(),
			want:  plan(3, 4),
		},
		{
			name:  "a group short of batch_size waits for one still testing behind it, from when its first became ready",
			facts: facts(map[int]time.Duration{3: 3 * time.Minute, 4: 0}, []int{3, 4}, 9),
			p:     trainPolicy(five),
			want:  fill(2 * time.Minute),
		},
		{
			name:  "once batch_wait passed since its first became ready, it goes short",
			facts: facts(map[int]time.Duration{3: 5 * time.Minute, 4: 0}, []int{3, 4}, 9),
			p:     trainPolicy(five),
			want:  plan(3, 4),
		},
		{
			name:  "a full group does not wait for those behind it",
			facts: facts(map[int]time.Duration{1: 0, 2: 0, 3: 0, 4: 0}, []int{1, 2, 3, 4}, 9),
			p:     trainPolicy(),
			want:  plan(1, 2, 3, 4),
		},
		{
			name: "a higher priority still testing is ahead of an earlier arrival",
			facts: func() rules.TrainFacts {
				f := facts(map[int]time.Duration{3: 0}, []int{3}, 9)
				f.Pending[0].Priority = 1
				return f
			}(),
			p:    trainPolicy(),
			want: wait(rules.DefaultBatchWait),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := rules.DecideTrain(tc.facts, tc.p)
			if until := rules.BatchWaitUntil(tc.facts, tc.p); !until.IsZero() {
				got.Reason += " (" + until.Sub(trainNow).String() + ")"
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("DecideTrain =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// A train that speculates (Train.Speculate): an entry whose own checks
// still run joins a group when nothing else keeps it out; its group
// lands only once they passed; a failed piece whose own checks still run
// waits for them before it is taken out.
func TestDecideTrainSpeculate(t *testing.T) {
	speculate := trainPolicy(func(p *rules.Policy) { p.Train.Speculate = true })
	entry := rules.Facts{Entry: lifecycle.Item{Entry: lifecycle.Entry{PRNumber: 1, PRSha: sha(1), Status: lifecycle.StatusQueued}, BaseRef: "main"},
		Gate: pending, Now: trainNow}
	if a := rules.DecideTrainEntry(entry, trainPolicy()); a.Status != lifecycle.StatusEvaluating || a.Reason != pending.Reason {
		t.Errorf("checks running, not speculating: %+v, want a wait for its checks", a)
	}
	a := rules.DecideTrainEntry(entry, speculate)
	if a.Status != lifecycle.StatusEvaluating || a.Reason != rules.SpeculatingPrefix+pending.Reason {
		t.Errorf("checks running, speculating: %+v, want it in the train while they run", a)
	}
	it := entry.Entry
	it.Status, it.GateReason = a.Status, a.Reason
	if !rules.Speculating(it) {
		t.Errorf("Speculating(%+v) is false", it)
	}
	unapproved := entry
	unapproved.Rules.Reviews, unapproved.Reviews = 1, &lifecycle.Reviews{}
	if a := rules.DecideTrainEntry(unapproved, speculate); a.Reason != pending.Reason {
		t.Errorf("checks running, approval missing: %+v, want a wait for its checks, not the train", a)
	}
	held := entry
	held.Entry.ConsentSha = sha(9)
	if a := rules.DecideTrainEntry(held, speculate); a.Kind != rules.Block {
		t.Errorf("checks running, head not consented to: %+v, want held", a)
	}

	running := func(f rules.TrainFacts, ns ...int) rules.TrainFacts {
		for _, n := range ns {
			it := f.Entries[n]
			it.Status, it.GateReason = lifecycle.StatusEvaluating, rules.SpeculatingPrefix+pending.Reason
			f.Entries[n] = it
		}
		return f
	}
	tests := []struct {
		name  string
		facts rules.TrainFacts
		want  rules.TrainAction
	}{
		{
			name:  "a group that passed waits for a member's own checks",
			facts: running(trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPassed, "tip", "g1", 1, 2)}, nil), 2),
			want:  rules.TrainAction{Kind: rules.TrainWait, Reason: "waiting for #2's own checks before its group lands"},
		},
		{
			name:  "once they passed, it lands",
			facts: trainFacts([]lifecycle.Group{group(1, lifecycle.GroupPassed, "tip", "g1", 1, 2)}, nil),
			want:  rules.TrainAction{Kind: rules.TrainLand, Group: group(1, lifecycle.GroupPassed, "tip", "g1", 1, 2), Landing: rules.LandFastForward, Reason: "its checks passed"},
		},
		{
			name: "skip intermediate results land only the groups before one whose member's own checks run",
			facts: running(trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1), group(2, lifecycle.GroupTesting, "g1", "g2", 2),
				group(3, lifecycle.GroupTesting, "g2", "g3", 3)}, []lifecycle.Verdict{pending, passed, passed}), 3),
			want: rules.TrainAction{Kind: rules.TrainLand, Group: group(2, lifecycle.GroupTesting, "g1", "g2", 2),
				Through: []lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1)}, Landing: rules.LandFastForward,
				Reason: "its checks passed on the pull requests ahead of it (#1): they land with it"},
		},
		{
			name: "a failed piece whose own checks run waits for them",
			facts: running(trainFacts([]lifecycle.Group{{ID: 1, Base: "main", Seq: 1, State: lifecycle.GroupTesting, PRs: members(3), Parent: "tip", Head: "g1",
				Split: true, BuiltAt: trainNow.Add(-10 * time.Minute).UnixMilli()}}, []lifecycle.Verdict{failing}), 3),
			want: rules.TrainAction{Kind: rules.TrainWait, Group: lifecycle.Group{ID: 1, Base: "main", Seq: 1, State: lifecycle.GroupTesting, PRs: members(3), Parent: "tip", Head: "g1",
				Split: true, BuiltAt: trainNow.Add(-10 * time.Minute).UnixMilli()},
				Reason: `#3 failed merged on the pull requests ahead (required check "ci" failed); waiting for its own checks before it is taken out`},
		},
		{
			name: "a failed group of one names what landed since it was queued at its head: others land while its own checks run",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(2, lifecycle.GroupTesting, "tip", "g2", 12)}, []lifecycle.Verdict{failing})
				it := f.Entries[12]
				headAt, passedAt := trainNow.Add(-40*time.Minute).UnixMilli(), trainNow.Add(-30*time.Minute).UnixMilli()
				it.HeadAt, it.GateResultAt = headAt, &passedAt
				f.Entries[12] = it
				f.Landed = lifecycle.Landed{Tip: "tip", Tested: "tip", Recent: []lifecycle.LandedPR{
					{Number: 3, At: headAt - 1}, {Number: 9, At: headAt + 1}, {Number: 10, At: passedAt + 2}}}
				return f
			}(),
			want: rules.TrainAction{Kind: rules.TrainBounce, Group: group(2, lifecycle.GroupTesting, "tip", "g2", 12), Culprit: member(12),
				Reason:  failing.Reason,
				Bounced: rules.Bounced{Kind: rules.BounceTrainFailure, Detail: failing.Reason, Base: "main", At: "tip", Since: []int{9, 10}, SinceQueued: true}},
		},
		{
			name: "a member whose own checks failed is dropped, and its group built again",
			facts: func() rules.TrainFacts {
				f := trainFacts([]lifecycle.Group{group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2)}, []lifecycle.Verdict{pending})
				it := f.Entries[2]
				it.Status = lifecycle.StatusBounced
				f.Entries[2] = it
				return f
			}(),
			want: rules.TrainAction{Kind: rules.TrainDrop, Group: group(1, lifecycle.GroupTesting, "tip", "g1", 1, 2), PRs: members(2), Reason: "#2 was taken out of the queue"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := rules.DecideTrain(tt.facts, speculate); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("DecideTrain:\n got  %+v\n want %+v", got, tt.want)
			}
		})
	}
}
