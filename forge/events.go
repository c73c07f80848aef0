package forge

import (
	"context"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// TriggerTimes says when a pull request's merge triggers were last set, as
// its issue events record them. A zero time means no such event was found.
type TriggerTimes struct {
	// LabeledAt is the time of the latest "labeled" event for the label
	// asked about (compared case-insensitively, as GitHub does).
	LabeledAt time.Time
	// LabeledBy is who added it then (the event's actor).
	LabeledBy string
	// AutoMergeAt is the time of the latest auto_merge_enabled event (or
	// auto_squash_enabled / auto_rebase_enabled, GitHub's names for
	// auto-merge with those methods).
	AutoMergeAt time.Time
}

// TriggerTimes reads GET /repos/{owner}/{repo}/issues/{number}/events (all
// pages) and returns when label was last added to PR number and when
// auto-merge was last enabled on it. The cron uses it to rebuild a lost
// queue in GitHub's order; it is called only for pull requests that must
// join, so an unchanged repository costs nothing.
func (c *Client) TriggerTimes(ctx context.Context, tenant, repo string, number int, label string) (TriggerTimes, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "issues.list-events", tenant, repo)
	if err != nil {
		return TriggerTimes{}, err
	}
	cl.number = number
	opts := &github.ListOptions{PerPage: 100}
	var out TriggerTimes
	for {
		evs, resp, err := in.gh.Issues.ListIssueEvents(ctx, owner, name, number, opts)
		if err != nil {
			return TriggerTimes{}, cl.classify(ctx, err, false)
		}
		for _, ev := range evs {
			at := ev.GetCreatedAt().Time
			switch ev.GetEvent() {
			case "labeled":
				if label != "" && strings.EqualFold(ev.GetLabel().GetName(), label) && !at.Before(out.LabeledAt) {
					out.LabeledAt, out.LabeledBy = at, ev.GetActor().GetLogin()
				}
			case "auto_merge_enabled", "auto_squash_enabled", "auto_rebase_enabled":
				if at.After(out.AutoMergeAt) {
					out.AutoMergeAt = at
				}
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}
