package app

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

func (h *harness) order() []int {
	var out []int
	for _, it := range h.queue() {
		out = append(out, it.PRNumber)
	}
	return out
}

// The operator's queue actions, from the admin API (JSON) and the
// dashboard's forms (same origin): a move to the front and back, a
// removal that comments who and why and takes the trigger label off on
// GitHub, a retry of an entry that is not blocked refused; each audited
// with who.
func TestQueueActions(t *testing.T) {
	h := newHarness(t)
	shas := map[int]string{1: strings.Repeat("a", 40), 2: strings.Repeat("b", 40), 3: strings.Repeat("c", 40)}
	for n := 1; n <= 3; n++ {
		h.label(n, shas[n])
		h.clock.Advance(time.Second)
	}
	h.settle()
	if got := h.order(); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("queue = %v", got)
	}
	var ans map[string]any
	if code := postJSON(t, h.admin+"/queue/move", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 3, "to": "front", "by": "ana", "why": "hotfix"}, &ans); code != 200 || ans["changed"] != true {
		t.Fatalf("POST /queue/move: %d %v", code, ans)
	}
	h.settle()
	if got := h.order(); !slices.Equal(got, []int{3, 1, 2}) {
		t.Fatalf("after the move to the front: %v", got)
	}
	if code := postJSON(t, h.admin+"/queue/move", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 3, "to": "sideways", "by": "ana"}, &ans); code != 400 || ans["field"] != "to" {
		t.Fatalf("a move sideways: %d %v", code, ans)
	}
	if code := postJSON(t, h.admin+"/queue/move", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 3, "to": "back"}, &ans); code != 400 || ans["field"] != "by" {
		t.Fatalf("a move without by: %d %v", code, ans)
	}
	// What the operator says is bounded: it goes to the store, the log and
	// a removed pull request's comment. Refused, the queue is as it was.
	if code := postJSON(t, h.admin+"/queue/remove", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 3, "by": "ana", "why": strings.Repeat("w", 1001)}, &ans); code != 400 || ans["field"] != "why" {
		t.Fatalf("a removal with a 1001-byte why: %d %v", code, ans)
	}
	if code := postJSON(t, h.admin+"/queue/move", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 3, "to": "back", "by": strings.Repeat("a", 101)}, &ans); code != 400 || ans["field"] != "by" {
		t.Fatalf("a move by a 101-byte name: %d %v", code, ans)
	}
	h.settle()
	if got := h.order(); !slices.Equal(got, []int{3, 1, 2}) {
		t.Fatalf("after two refused actions: %v", got)
	}
	if code := postJSON(t, h.admin+"/queue/retry", map[string]any{"tenant": testTenant, "repo": testRepo, "pr": 1, "by": "ana"}, &ans); code != 404 {
		t.Fatalf("retry of an entry that is not blocked: %d %v", code, ans)
	}

	// The repository page has the forms; the removal form's post comes
	// back to the page.
	resp, err := http.Get(h.admin + "/repos/" + testTenant + "/" + testRepo)
	if err != nil {
		t.Fatal(err)
	}
	var page strings.Builder
	buf := make([]byte, 1<<16)
	for {
		n, err := resp.Body.Read(buf)
		page.Write(buf[:n])
		if err != nil {
			break
		}
	}
	resp.Body.Close()
	for _, want := range []string{`action="/queue/move"`, `action="/queue/remove"`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the repository page has no form %s", want)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := url.Values{"tenant": {testTenant}, "repo": {testRepo}, "pr": {"2"}, "by": {"bo"}, "why": {"waits for the release"}}
	req, _ := http.NewRequest(http.MethodPost, h.admin+"/queue/remove", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("removal form: %d", resp.StatusCode)
	}
	h.settle()
	if got := h.order(); !slices.Equal(got, []int{3, 1}) {
		t.Fatalf("after the removal: %v", got)
	}
	h.eventually("the removal's comment and label", func() bool {
		return slices.ContainsFunc(h.gh.Comments(), func(c fakegithub.Comment) bool {
			return c.PRNumber == 2 && c.Body == "Taken out of the merge queue by bo: waits for the release. Add the `automerge` label again to rejoin it."
		}) && slices.Contains(h.gh.LabelsRemoved(), fakegithub.LabelRemoval{Repo: testRepo, PRNumber: 2, Label: "automerge"})
	})
	// From another site: refused.
	req, _ = http.NewRequest(http.MethodPost, h.admin+"/queue/remove", strings.NewReader(url.Values{"tenant": {testTenant}, "repo": {testRepo}, "pr": {"3"}, "by": {"eve"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := noRedirect.Do(req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site removal answered %d", resp.StatusCode)
	}
	audit, err := h.app.Store.Audit(t.Context(), testKey)
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, a := range audit {
		if a.Action == leasedo.AuditMove || a.Action == leasedo.AuditRemove {
			ops = append(ops, a.Action+" #"+strconv.Itoa(a.PRNumber)+" "+a.Reason)
		}
	}
	if want := []string{"move #3 moved to the front by ana: hotfix", "remove #2 taken out by bo: waits for the release"}; !slices.Equal(ops, want) {
		t.Fatalf("audit = %q, want %q", ops, want)
	}
}
