package fakegithub

import (
	"cmp"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Issue events and the App's installation listing: what the cron reads to
// rediscover repositories and to rebuild a lost queue in GitHub's order.

// issueEvent is one entry of a PR's issue events (labeled, unlabeled,
// auto_merge_enabled, auto_merge_disabled).
type issueEvent struct {
	id    int64
	event string
	label string // labeled / unlabeled
	at    time.Time
}

// IssueEvent is an issue event as IssueEvents returns it.
type IssueEvent struct {
	Event string
	Label string
	At    time.Time
}

// addIssueEvent appends an event to PR number's log. Called with s.mu held.
func (s *Server) addIssueEvent(rp *repo, number int, event, label string, at time.Time) {
	rp.issueEvents[number] = append(rp.issueEvents[number], &issueEvent{id: s.newID(), event: event, label: label, at: at.UTC().Truncate(time.Second)})
}

// recordTriggerChanges records the label and auto-merge changes between
// before and after at the server's now. Called with s.mu held.
func (s *Server) recordTriggerChanges(rp *repo, before PR, after *PR) {
	now := s.now()
	for _, l := range after.Labels {
		if !slices.ContainsFunc(before.Labels, func(b string) bool { return strings.EqualFold(b, l) }) {
			s.addIssueEvent(rp, after.Number, "labeled", l, now)
		}
	}
	for _, l := range before.Labels {
		if !slices.ContainsFunc(after.Labels, func(a string) bool { return strings.EqualFold(a, l) }) {
			s.addIssueEvent(rp, after.Number, "unlabeled", l, now)
		}
	}
	switch {
	case after.AutoMerge && !before.AutoMerge:
		s.addIssueEvent(rp, after.Number, "auto_merge_enabled", "", now)
	case !after.AutoMerge && before.AutoMerge:
		s.addIssueEvent(rp, after.Number, "auto_merge_disabled", "", now)
	}
}

// LabelPR adds label to the PR as if it happened at at (its issue event
// carries that time). A label already there is re-added (a new event).
func (s *Server) LabelPR(fullName string, number int, label string, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, pr := s.mustPR(fullName, number)
	if !slices.ContainsFunc(pr.Labels, func(l string) bool { return strings.EqualFold(l, label) }) {
		pr.Labels = append(pr.Labels, label)
	}
	pr.UpdatedAt = s.now()
	s.addIssueEvent(rp, number, "labeled", label, at)
}

// IssueEvents returns the PR's recorded issue events, oldest first.
func (s *Server) IssueEvents(fullName string, number int) []IssueEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	var out []IssueEvent
	for _, ev := range rp.issueEvents[number] {
		out = append(out, IssueEvent{Event: ev.event, Label: ev.label, At: ev.at})
	}
	return out
}

// SuspendInstallation suspends (or unsuspends) an installation: it is listed
// with suspended_at and no token can be minted for it (403).
func (s *Server) SuspendInstallation(tenant string, suspended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if suspended {
		s.suspended[tenant] = s.now()
	} else {
		delete(s.suspended, tenant)
	}
}

// RemoveInstallation deletes an installation and its repositories (the App
// was uninstalled).
func (s *Server) RemoveInstallation(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.installations, tenant)
	delete(s.suspended, tenant)
	for name, rp := range s.repos {
		if rp.tenant == tenant {
			delete(s.repos, name)
		}
	}
}

// listInstallations answers GET /app/installations (App JWT).
func (s *Server) listInstallations(w http.ResponseWriter, r *http.Request) {
	ids := map[string]bool{}
	for id := range s.installations {
		ids[id] = true
	}
	for _, rp := range s.repos {
		ids[rp.tenant] = true
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Slice(sorted, func(i, j int) bool {
		a, _ := strconv.ParseInt(sorted[i], 10, 64)
		b, _ := strconv.ParseInt(sorted[j], 10, 64)
		if a != b {
			return a < b
		}
		return sorted[i] < sorted[j]
	})
	out := []obj{}
	for _, id := range paginate(w, r, sorted) {
		out = append(out, s.installationJSON(id))
	}
	writeJSON(w, http.StatusOK, out)
}

// installationJSON is one installation; its account is the owner of its
// first repository (by name), or "org-<id>" when it has none.
func (s *Server) installationJSON(id string) obj {
	account := ""
	for _, rp := range s.repos {
		if rp.tenant != id {
			continue
		}
		if owner, _, _ := strings.Cut(rp.fullName, "/"); account == "" || owner < account {
			account = owner
		}
	}
	if account == "" {
		account = "org-" + id
	}
	n, _ := strconv.ParseInt(id, 10, 64)
	var suspendedAt any
	if at, ok := s.suspended[id]; ok {
		suspendedAt = ts(at)
	}
	return obj{
		"id":                   n,
		"account":              s.userJSON(account),
		"app_id":               s.appID,
		"target_id":            n,
		"target_type":          "Organization",
		"repository_selection": "selected",
		"access_tokens_url":    s.apiURL("app/installations/%s/access_tokens", id),
		"repositories_url":     s.apiURL("installation/repositories"),
		"html_url":             htmlBase + "organizations/" + account + "/settings/installations/" + id,
		"permissions":          map[string]string{"checks": "write", "contents": "write", "issues": "write", "pull_requests": "write", "statuses": "read", "metadata": "read"},
		"events":               []string{"pull_request", "check_suite", "check_run", "status", "push"},
		"created_at":           ts(time.Unix(0, 0)),
		"updated_at":           ts(time.Unix(0, 0)),
		"single_file_name":     nil,
		"suspended_at":         suspendedAt,
		"suspended_by":         nil,
	}
}

// listIssueEvents answers GET /repos/{owner}/{repo}/issues/{n}/events,
// oldest first.
func (s *Server) listIssueEvents(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "issue_number")
	if pr == nil {
		return
	}
	out := []obj{}
	for _, ev := range paginate(w, r, rp.issueEvents[pr.Number]) {
		o := obj{
			"id":         ev.id,
			"node_id":    nodeID("LE", ev.id),
			"url":        s.apiURL("repos/%s/issues/events/%d", rp.fullName, ev.id),
			"actor":      s.userJSON(cmp.Or(pr.LabeledBy, pr.Author)),
			"event":      ev.event,
			"commit_id":  nil,
			"commit_url": nil,
			"created_at": ts(ev.at),
		}
		if ev.label != "" {
			o["label"] = obj{"name": ev.label, "color": "ededed"}
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, out)
}
