package rules

import (
	"fmt"
	"path"
	"strings"
)

// DefaultTriggerLabel is the label that puts a PR in the queue by default.
const DefaultTriggerLabel = "automerge"

// Options says which triggers make a pull request eligible (docs/queue.md).
// The zero value has both triggers off; start from DefaultOptions.
type Options struct {
	// TriggerLabel puts a PR in the queue; "" turns the label trigger off.
	TriggerLabel string
	// TriggerLabels, when not nil, replaces TriggerLabel: any of them
	// puts a PR in the queue (a repository's trigger_labels); empty turns
	// the label trigger off.
	TriggerLabels []string
	// AutoMergeTrigger makes GitHub auto-merge (auto_merge not null) a trigger.
	AutoMergeTrigger bool
	// Branches, when not empty, are the base branches (names or path.Match
	// patterns such as release-*) that have a queue; other bases do not.
	Branches []string
	// PriorityLabels rank pull requests, highest first (a join takes
	// its rank from its labels).
	PriorityLabels []string
	// LabelRequiresWrite: a trigger label counts only when whoever added
	// it may write to the repository (checked by the sync).
	LabelRequiresWrite bool
	// BlockingLabels hold a pull request back (its removal makes the
	// entry be read again).
	BlockingLabels []string
	// For, when set, returns a repository's own options (its
	// .github/mergegate.yml over these defaults). It is read on the
	// webhook path, inside the inbox's transaction: it must answer from
	// memory and never call GitHub.
	For func(tenant, repo string) Options `json:"-"`
}

// Of returns the options of (tenant, repo): o.For's when set, else o.
func (o Options) Of(tenant, repo string) Options {
	if o.For != nil {
		return o.For(tenant, repo)
	}
	return o
}

// Labels are the trigger labels in force.
func (o Options) Labels() []string {
	if o.TriggerLabels != nil {
		return o.TriggerLabels
	}
	if o.TriggerLabel != "" {
		return []string{o.TriggerLabel}
	}
	return nil
}

// HasQueue reports whether base has a queue under o.Branches (an unknown
// base, "", has).
func (o Options) HasQueue(base string) bool {
	if len(o.Branches) == 0 || base == "" {
		return true
	}
	for _, b := range o.Branches {
		if ok, _ := path.Match(b, base); ok || b == base {
			return true
		}
	}
	return false
}

// PriorityOf is the rank labels give under priorityLabels (a list from
// highest down): the highest listed label present ranks len(list)-i; none,
// 0. name is the label ("" for none).
func PriorityOf(priorityLabels, labels []string) (rank int, name string) {
	for i, l := range priorityLabels {
		if HasLabel(labels, l) {
			return len(priorityLabels) - i, l
		}
	}
	return 0, ""
}

// TriggerOf is the first trigger label among labels ("" for none).
func (o Options) TriggerOf(labels []string) string {
	for _, l := range o.Labels() {
		if HasLabel(labels, l) {
			return l
		}
	}
	return ""
}

// DefaultOptions is the label "automerge" and auto-merge, both on.
func DefaultOptions() Options {
	return Options{TriggerLabel: DefaultTriggerLabel, AutoMergeTrigger: true}
}

// Eligibility is what the eligibility rule reads of a pull request; the
// webhook path fills it from a payload, a sync from GitHub's API.
type Eligibility struct {
	State     string // open, closed
	Draft     bool
	Base      string // the base branch, "" when not known
	Labels    []string
	AutoMerge bool // auto_merge is not null
}

// Ineligibility says why a pull request is not eligible (docs/queue.md), "" when
// it is: open, not a draft, and carrying the trigger label or with
// auto-merge enabled (each trigger can be off).
func Ineligibility(e Eligibility, opt Options) string {
	labels := opt.Labels()
	quoted := make([]string, len(labels))
	for i, l := range labels {
		quoted[i] = fmt.Sprintf("%q", l)
	}
	label := strings.Join(quoted, " or ")
	switch {
	case e.State != "open":
		if e.State == "" {
			return "pull request is in an unknown state"
		}
		return "pull request is " + e.State
	case e.Draft:
		return "pull request is a draft"
	case !opt.HasQueue(e.Base):
		return fmt.Sprintf("its base branch %s has no queue (branches: %s)", e.Base, strings.Join(opt.Branches, ", "))
	case opt.TriggerOf(e.Labels) != "":
		return ""
	case opt.AutoMergeTrigger && e.AutoMerge:
		return ""
	case len(labels) == 0 && !opt.AutoMergeTrigger:
		return "both triggers (label and auto-merge) are off"
	case len(labels) == 0:
		return "auto-merge is not enabled"
	case !opt.AutoMergeTrigger:
		return fmt.Sprintf("no %s label", label)
	}
	return fmt.Sprintf("no %s label and auto-merge is not enabled", label)
}

// HasLabel compares names case-insensitively, as GitHub does.
func HasLabel(labels []string, name string) bool {
	for _, l := range labels {
		if strings.EqualFold(l, name) {
			return true
		}
	}
	return false
}
