package app

import (
	"context"
	"fmt"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
)

const checkRunSummary = "mergegate merges one pull request at a time, the first in line, " +
	"and only at the commit whose required checks passed. This check shows where this pull request stands."

// publish gives every queued PR (the first publishDepth) a mergegate check
// run whose title says its position and what it waits for. A check run is
// written only when its title changes: GitHub allows about 80
// content-creating requests a minute.
func (e *Engine) publish(ctx context.Context, l *leasedo.Lease) error {
	k := l.Key
	items, err := e.store.Items(ctx, k)
	if err != nil {
		return err
	}
	var live []leasedo.Item
	for _, it := range items {
		if it.Status != leasedo.StatusBounced {
			live = append(live, it)
		}
	}
	for i, it := range live {
		if i >= publishDepth {
			break
		}
		title := checkTitle(i, live)
		if title == it.CheckTitle {
			continue
		}
		cr := forge.CheckRun{Status: "in_progress", Title: title, Summary: checkRunSummary}
		id := it.CheckRunID
		if id == 0 {
			id, err = e.forge.CreateCheckRun(ctx, k.Tenant, k.Repo, it.PRSha, cr)
		} else {
			err = e.forge.UpdateCheckRun(ctx, k.Tenant, k.Repo, id, cr)
		}
		if err != nil {
			return err
		}
		if err := e.store.SetCheckRun(ctx, l, it.PRNumber, it.PRSha, id, title); err != nil {
			return err
		}
	}
	return nil
}

// checkTitle says where live[i] stands and what it waits for.
func checkTitle(i int, live []leasedo.Item) string {
	it := live[i]
	var waits string
	switch {
	case it.Status == leasedo.StatusGatePassed && i == 0 && it.BranchUpdatedSha == it.PRSha:
		waits = "branch being updated from its base"
	case it.Status == leasedo.StatusGatePassed && i == 0:
		waits = "checks passed, merging"
	case it.Status == leasedo.StatusGatePassed:
		waits = "checks passed"
	case it.GateReason != "":
		waits = it.GateReason
	default:
		waits = "checks being read"
	}
	if i == 0 {
		return "1st in the merge queue: " + waits
	}
	return fmt.Sprintf("%s of %d in the merge queue, after #%d: %s", ordinal(i+1), len(live), live[0].PRNumber, waits)
}

// finishCheckRun completes the PR's check run (merged or out of the queue).
func (e *Engine) finishCheckRun(ctx context.Context, k leasedo.Key, it leasedo.Item, conclusion, title, summary string) {
	cr := forge.CheckRun{Status: "completed", Conclusion: conclusion, Title: title, Summary: summary}
	var err error
	if it.CheckRunID != 0 {
		err = e.forge.UpdateCheckRun(ctx, k.Tenant, k.Repo, it.CheckRunID, cr)
	} else {
		_, err = e.forge.CreateCheckRun(ctx, k.Tenant, k.Repo, it.PRSha, cr)
	}
	if err != nil {
		e.prLog(k, it.PRNumber, it.PRSha).Error().Err(err).Msg("could not complete the mergegate check run")
	}
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
