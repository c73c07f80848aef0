package rules

import (
	"fmt"
	"strings"
)

// DefaultTriggerLabel is the label that puts a PR in the queue by default.
const DefaultTriggerLabel = "automerge"

// Options says which triggers make a pull request eligible (docs/queue.md).
// The zero value has both triggers off; start from DefaultOptions.
type Options struct {
	// TriggerLabel puts a PR in the queue; "" turns the label trigger off.
	TriggerLabel string
	// AutoMergeTrigger makes GitHub auto-merge (auto_merge not null) a trigger.
	AutoMergeTrigger bool
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
	Labels    []string
	AutoMerge bool // auto_merge is not null
}

// Ineligibility says why a pull request is not eligible (docs/queue.md), "" when
// it is: open, not a draft, and carrying the trigger label or with
// auto-merge enabled (each trigger can be off).
func Ineligibility(e Eligibility, opt Options) string {
	switch {
	case e.State != "open":
		if e.State == "" {
			return "pull request is in an unknown state"
		}
		return "pull request is " + e.State
	case e.Draft:
		return "pull request is a draft"
	case opt.TriggerLabel != "" && HasLabel(e.Labels, opt.TriggerLabel):
		return ""
	case opt.AutoMergeTrigger && e.AutoMerge:
		return ""
	case opt.TriggerLabel == "" && !opt.AutoMergeTrigger:
		return "both triggers (label and auto-merge) are off"
	case opt.TriggerLabel == "":
		return "auto-merge is not enabled"
	case !opt.AutoMergeTrigger:
		return fmt.Sprintf("no %q label", opt.TriggerLabel)
	}
	return fmt.Sprintf("no %q label and auto-merge is not enabled", opt.TriggerLabel)
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
