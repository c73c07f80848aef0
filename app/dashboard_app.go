package app

import (
	"net/http"
	"sort"
	"time"
)

// dashboard is the App's dashboard: its store, clock and GitHub, and the
// status of the parts the set-up flow may replace.
func (a *App) dashboard() http.Handler {
	return NewDashboard(DashboardConfig{
		Store: a.Store, Clock: a.cfg.Clock, GitHubURL: a.cfg.GitHubURL, Logger: a.log,
		Status: a.dashboardStatus, Policies: a.policies.Load,
	})
}

func (a *App) dashboardStatus() DashboardStatus {
	fc, _, cron := a.current()
	st := DashboardStatus{GitHub: fc != nil, Setup: a.setup != nil && !a.setup.Done()}
	if fc != nil {
		for _, f := range fc.AuthFailures() {
			st.AuthFailures = append(st.AuthFailures, AuthFailureView{Tenant: f.Tenant, Repo: f.Repo, Status: f.Status, Message: f.Message, Since: f.Since.UnixMilli()})
		}
		for tenant, b := range fc.WriteBudgets() {
			v := WriteBudgetView{Tenant: tenant, PerMinute: b.PerMinute, PerHour: b.PerHour, LastMinute: b.LastMinute, LastHour: b.LastHour, HeldBack: b.HeldBack}
			if !b.Held.IsZero() {
				v.HeldSince, v.HeldText = b.Held.UnixMilli(), timeText(b.Held)
			}
			st.WriteBudgets = append(st.WriteBudgets, v)
		}
		sort.Slice(st.WriteBudgets, func(i, j int) bool { return st.WriteBudgets[i].Tenant < st.WriteBudgets[j].Tenant })
	}
	if cron == nil {
		return st
	}
	st.CronRuns = cron.Runs()
	st.CronLastDurationMS = cron.LastDuration().Milliseconds()
	last := cron.LastSuccess()
	if !last.IsZero() {
		st.CronLastSuccess = last.UnixMilli()
	}
	// The cron runs on the wall clock (robfig/cron).
	st.CronStale = st.CronRuns > 0 && (last.IsZero() || time.Since(last) > 3*a.cfg.ReconcileEvery)
	return st
}
