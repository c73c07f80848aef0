package policy

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mergegate/mergegate/rules"
)

// Where a repository's policy comes from.
const (
	SourceRepo     = "repository"   // its own .github/mergegate.yml
	SourceOrg      = "organisation" // <owner>/.github's .github/mergegate.yml
	SourceDefaults = "defaults"     // no file: the operator's flags
)

// Effective is a repository's policy in force: the file it was read from
// (or none) over the operator's defaults. When the latest read of the
// file had problems, Config is the last good file's (or none) and
// Problems say what is wrong with the new one, and where.
type Effective struct {
	Source   string   `json:"source"`
	File     string   `json:"file,omitempty"` // owner/name:path of the file in force
	SHA      string   `json:"sha,omitempty"`  // its blob sha
	Config   File     `json:"config"`
	Problems Problems `json:"problems,omitempty"`
	// BadSHA is the blob sha of the file with Problems (logged once per
	// change).
	BadSHA string `json:"badSha,omitempty"`
	// Defaults are the operator's flags.
	Defaults rules.Policy `json:"-"`
}

// Defaults is the policy of a repository without a file.
func Defaults(d rules.Policy) Effective {
	return Effective{Source: SourceDefaults, Defaults: d}
}

// branch returns the per-branch settings for base over the top level.
func (e Effective) branch(base string) (Branch, string) {
	b := e.Config.Branch
	o, ok := e.Config.BaseBranches[base]
	if !ok {
		return b, ""
	}
	if o.MergeMethod != nil {
		b.MergeMethod = o.MergeMethod
	}
	if o.MergeCommit != nil {
		b.MergeCommit = o.MergeCommit
	}
	if o.CheckTimeout != nil {
		b.CheckTimeout = o.CheckTimeout
	}
	if o.UpdateMethod != nil {
		b.UpdateMethod = o.UpdateMethod
	}
	if o.Frozen != nil {
		b.Frozen = o.Frozen
	}
	if o.FreezeMessage != nil {
		b.FreezeMessage = o.FreezeMessage
	}
	if o.Mode != nil {
		b.Mode = o.Mode
	}
	if o.BatchSize != nil {
		b.BatchSize = o.BatchSize
	}
	if o.Parallel != nil {
		b.Parallel = o.Parallel
	}
	if o.Retries != nil {
		b.Retries = o.Retries
	}
	if o.BatchWait != nil {
		b.BatchWait = o.BatchWait
	}
	if o.Speculate != nil {
		b.Speculate = o.Speculate
	}
	if o.Landing != nil {
		b.Landing = o.Landing
	}
	return b, "base_branches." + base + "."
}

// Options are the repository's eligibility triggers.
func (e Effective) Options() rules.Options {
	o := e.Defaults.Triggers
	o.For = nil
	c := e.Config
	if c.TriggerLabels != nil {
		o.TriggerLabels = c.TriggerLabels
	}
	if c.AutoMergeTrigger != nil {
		o.AutoMergeTrigger = *c.AutoMergeTrigger
	}
	if c.Branches != nil {
		o.Branches = c.Branches
	}
	o.PriorityLabels = c.PriorityLabels
	o.BlockingLabels = c.BlockingLabels
	if c.LabelRequiresWrite != nil {
		o.LabelRequiresWrite = *c.LabelRequiresWrite
	}
	return o
}

// For is the rules.Policy of base's queue.
func (e Effective) For(base string) rules.Policy {
	p := e.Defaults
	p.Triggers = e.Options()
	c := e.Config
	b, prefix := e.branch(base)
	if b.MergeMethod != nil {
		p.MergeMethod = *b.MergeMethod
		p.MethodFrom = "merge_method in " + Path
		if prefix != "" && e.Config.BaseBranches[base].MergeMethod != nil {
			p.MethodFrom = prefix + "merge_method in " + Path
		}
	}
	if b.CheckTimeout != nil {
		p.CheckTimeout, _ = ParseTimeout(*b.CheckTimeout)
	}
	if b.Frozen != nil && *b.Frozen {
		p.Frozen = true
		if b.FreezeMessage != nil {
			p.FreezeMessage = *b.FreezeMessage
		}
	}
	if b.UpdateMethod != nil {
		p.UpdateMethod = *b.UpdateMethod
	}
	p.Train = p.Train.WithDefaults()
	if b.Mode != nil {
		p.Mode = *b.Mode
	}
	if b.BatchSize != nil {
		p.Train.BatchSize = *b.BatchSize
	}
	if b.Parallel != nil {
		p.Train.Parallel = *b.Parallel
	}
	if b.Retries != nil {
		p.Train.Retries = *b.Retries
	}
	if b.Landing != nil {
		p.Train.Landing = *b.Landing
	}
	if b.BatchWait != nil {
		p.Train.BatchWait, _ = ParseBatchWait(*b.BatchWait)
	}
	if b.Speculate != nil {
		p.Train.Speculate = *b.Speculate
	}
	if mc := b.MergeCommit; mc != nil {
		if mc.Title != nil {
			p.CommitTitle = *mc.Title
		}
		if mc.Message != nil {
			p.CommitMessage = *mc.Message
		}
	}
	p.BlockingLabels = c.BlockingLabels
	switch {
	case c.titleRE != nil:
		p.BlockingTitle = c.titleRE // compiled once, by Parse
	case c.BlockingTitle != nil && *c.BlockingTitle != "":
		// A File not from Parse (a test's): compiled here, bounded as
		// Parse bounds it.
		if len(*c.BlockingTitle) <= MaxPattern {
			p.BlockingTitle, _ = regexp.Compile(*c.BlockingTitle)
		}
	}
	if c.DeleteBranchAfterMerge != nil {
		p.DeleteBranch = *c.DeleteBranchAfterMerge
	}
	if c.LabelRequiresWrite != nil {
		p.LabelRequiresWrite = *c.LabelRequiresWrite
	}
	p.PriorityLabels = c.PriorityLabels
	return p
}

// Value is one key of the effective policy, its value and where the
// value came from (the file, the organisation's file, or the default).
type Value struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	From  string `json:"from"`
}

// Values lists every key of the top level with its effective value and
// source, then each base_branches entry's keys that it sets.
func (e Effective) Values() []Value {
	c, d := e.Config, e.Defaults
	from := func(set bool, def string) string {
		switch {
		case !set:
			return def
		case e.Source == SourceOrg:
			return "organisation (" + e.File + ")"
		}
		return "file (" + e.File + ")"
	}
	str := func(p *string, def string) string {
		if p != nil {
			return *p
		}
		return def
	}
	boolean := func(p *bool, def bool) string {
		if p != nil {
			return strconv.FormatBool(*p)
		}
		return strconv.FormatBool(def)
	}
	list := func(l []string, def []string) string {
		if l == nil {
			l = def
		}
		if len(l) == 0 {
			return "(none)"
		}
		return strings.Join(l, ", ")
	}
	number := func(p *int, def int) string {
		if p != nil {
			return strconv.Itoa(*p)
		}
		return strconv.Itoa(def)
	}
	train := rules.Train{}.WithDefaults()
	timeout := func(dur time.Duration) string {
		if dur <= 0 {
			return "never"
		}
		return dur.String()
	}
	var defLabels []string
	if d.Triggers.TriggerLabel != "" {
		defLabels = []string{d.Triggers.TriggerLabel}
	}
	mc := c.MergeCommit
	if mc == nil {
		mc = &MergeCommit{}
	}
	out := []Value{
		{"trigger_labels", list(c.TriggerLabels, defLabels), from(c.TriggerLabels != nil, "default (--trigger-label)")},
		{"auto_merge_trigger", boolean(c.AutoMergeTrigger, d.Triggers.AutoMergeTrigger), from(c.AutoMergeTrigger != nil, "default (--auto-merge-trigger)")},
		{"label_requires_write", boolean(c.LabelRequiresWrite, false), from(c.LabelRequiresWrite != nil, "default")},
		{"branches", list(c.Branches, []string{"(all)"}), from(c.Branches != nil, "default")},
		{"blocking_labels", list(c.BlockingLabels, nil), from(c.BlockingLabels != nil, "default")},
		{"blocking_title", str(c.BlockingTitle, "(none)"), from(c.BlockingTitle != nil, "default")},
		{"priority_labels", list(c.PriorityLabels, nil), from(c.PriorityLabels != nil, "default")},
		{"merge_method", str(c.MergeMethod, d.MergeMethod), from(c.MergeMethod != nil, "default (--merge-method)")},
		{"merge_commit.title", str(mc.Title, "(GitHub's)"), from(mc.Title != nil, "default")},
		{"merge_commit.message", str(mc.Message, "(GitHub's)"), from(mc.Message != nil, "default")},
		{"check_timeout", str(c.CheckTimeout, timeout(d.CheckTimeout)), from(c.CheckTimeout != nil, "default (--check-timeout)")},
		{"update_method", str(c.UpdateMethod, UpdateMerge), from(c.UpdateMethod != nil, "default")},
		{"delete_branch_after_merge", boolean(c.DeleteBranchAfterMerge, false), from(c.DeleteBranchAfterMerge != nil, "default")},
		{"frozen", boolean(c.Frozen, false), from(c.Frozen != nil, "default")},
		{"freeze_message", str(c.FreezeMessage, ""), from(c.FreezeMessage != nil, "default")},
		{"mode", str(c.Mode, rules.ModeSerial), from(c.Mode != nil, "default")},
		{"batch_size", number(c.BatchSize, train.BatchSize), from(c.BatchSize != nil, "default")},
		{"parallel", number(c.Parallel, train.Parallel), from(c.Parallel != nil, "default")},
		{"retries", number(c.Retries, train.Retries), from(c.Retries != nil, "default")},
		{"landing", str(c.Landing, train.Landing), from(c.Landing != nil, "default")},
		{"batch_wait", str(c.BatchWait, train.BatchWait.String()), from(c.BatchWait != nil, "default")},
		{"speculate", boolean(c.Speculate, false), from(c.Speculate != nil, "default")},
	}
	for _, name := range sortedBranches(c.BaseBranches) {
		b := c.BaseBranches[name]
		pre := "base_branches." + name + "."
		add := func(key string, p *string) {
			if p != nil {
				out = append(out, Value{pre + key, *p, from(true, "")})
			}
		}
		add("merge_method", b.MergeMethod)
		add("check_timeout", b.CheckTimeout)
		add("update_method", b.UpdateMethod)
		if b.Frozen != nil {
			out = append(out, Value{pre + "frozen", strconv.FormatBool(*b.Frozen), from(true, "")})
		}
		add("freeze_message", b.FreezeMessage)
		add("mode", b.Mode)
		for _, n := range []struct {
			key string
			v   *int
		}{{"batch_size", b.BatchSize}, {"parallel", b.Parallel}, {"retries", b.Retries}} {
			if n.v != nil {
				out = append(out, Value{pre + n.key, strconv.Itoa(*n.v), from(true, "")})
			}
		}
		add("landing", b.Landing)
		add("batch_wait", b.BatchWait)
		if b.Speculate != nil {
			out = append(out, Value{pre + "speculate", strconv.FormatBool(*b.Speculate), from(true, "")})
		}
		if b.MergeCommit != nil {
			add("merge_commit.title", b.MergeCommit.Title)
			add("merge_commit.message", b.MergeCommit.Message)
		}
	}
	return out
}

func sortedBranches(m map[string]Branch) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Priority levels a pull request is given by a command.
const (
	PriorityHigh   = 1000
	PriorityNormal = 0
	PriorityLow    = -1000
)

// PriorityOf is the priority the labels give under priority_labels (a
// list from highest down): the highest listed label present ranks
// len(list)-i; none, 0. name is the label ("" for none).
func PriorityOf(priorityLabels, labels []string) (rank int, name string) {
	return rules.PriorityOf(priorityLabels, labels)
}

// PriorityName says a rank in words for a check run's title ("" for 0).
func PriorityName(rank int, label string) string {
	switch {
	case label != "":
		return label
	case rank >= PriorityHigh:
		return "high"
	case rank <= PriorityLow:
		return "low"
	case rank != 0:
		return fmt.Sprintf("priority %d", rank)
	}
	return ""
}
