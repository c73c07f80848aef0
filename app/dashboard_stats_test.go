package app

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// The pictures' figures from a repository's audit: merges in 24 h and 7
// days, joining to merged p50/p90, bounces by reason (shas folded), the
// queue's length back in time, and the CI time of train groups, counted
// once per group; every picture is well-formed SVG.
func TestComputeStats(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	a := leasedo.Activity{QueueLength: 1, Complete: true, Audit: []leasedo.AuditEntry{
		{TS: at(6 * 24 * time.Hour), Action: leasedo.AuditJoin, PRNumber: 1},
		{TS: at(6*24*time.Hour - 10*time.Minute), Action: leasedo.AuditMerge, PRNumber: 1, Reason: "squash"},
		{TS: at(5 * time.Hour), Action: leasedo.AuditJoin, PRNumber: 2},
		{TS: at(5 * time.Hour), Action: leasedo.AuditJoin, PRNumber: 3},
		{TS: at(4 * time.Hour), Action: leasedo.AuditJoin, PRNumber: 4},
		{TS: at(3 * time.Hour), Action: leasedo.AuditBounce, PRNumber: 4, Reason: "its head abcdef1 conflicts with main"},
		{TS: at(3 * time.Hour), Action: leasedo.AuditLeave, PRNumber: 4},
		{TS: at(2 * time.Hour), Action: leasedo.AuditMerge, PRNumber: 2, Reason: "fast-forward, train group 7 after 4m0s of CI"},
		{TS: at(2 * time.Hour), Action: leasedo.AuditMerge, PRNumber: 3, Reason: "fast-forward, train group 7 after 4m0s of CI"},
		{TS: at(time.Hour), Action: leasedo.AuditJoin, PRNumber: 5},
		{TS: at(30 * time.Minute), Action: leasedo.AuditBounce, PRNumber: 6, Reason: "its head 1234567 conflicts with main"},
	}}
	st := computeStats([]leasedo.Activity{a}, now)
	if st.Merged24h != 2 || st.Merged7d != 3 || st.Bounced7d != 2 || st.QueueNow != 1 || !st.Complete {
		t.Fatalf("figures: %+v", st)
	}
	// 10m, 3h, 3h: p50 3h, p90 3h.
	if st.Merges != 3 || st.MergeP50MS != (3*time.Hour).Milliseconds() || st.MergeP90MS != (3*time.Hour).Milliseconds() {
		t.Fatalf("joining to merged: %d merges, p50 %d, p90 %d", st.Merges, st.MergeP50MS, st.MergeP90MS)
	}
	if len(st.Bounces) != 1 || st.Bounces[0] != (ReasonCount{Reason: "its head … conflicts with main", N: 2}) {
		t.Fatalf("bounces: %+v", st.Bounces)
	}
	if st.TrainGroups != 1 || st.TrainCIP50MS != (4*time.Minute).Milliseconds() {
		t.Fatalf("train CI: %d groups, p50 %d", st.TrainGroups, st.TrainCIP50MS)
	}
	if len(st.SVG) != 7 {
		t.Fatalf("%d pictures, want 7 (with the trains' CI)", len(st.SVG))
	}
	// The queue 24 h back was empty; 4.5 h back it held #2, #3, #4.
	day := string(st.SVG[0])
	if !strings.Contains(day, "now 1") {
		t.Errorf("the queue's picture does not say its length now: %s", day)
	}
	for i, svg := range st.SVG {
		dec := xml.NewDecoder(strings.NewReader(string(svg)))
		for {
			_, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("picture %d is not well-formed: %v\n%s", i, err, svg)
			}
		}
		if strings.Contains(string(svg), "<script") || strings.Contains(string(svg), "style=") {
			t.Errorf("picture %d has a script or a style attribute", i)
		}
	}
	// A reason is escaped.
	a.Audit = append(a.Audit, leasedo.AuditEntry{TS: at(time.Minute), Action: leasedo.AuditBounce, Reason: `<script>alert(1)</script>`})
	st = computeStats([]leasedo.Activity{a}, now)
	for _, svg := range st.SVG {
		if strings.Contains(string(svg), "<script>") {
			t.Fatalf("a reason is not escaped: %s", svg)
		}
	}
}

func TestQueueLengthBackInTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	a := leasedo.Activity{QueueLength: 1, Complete: true, Audit: []leasedo.AuditEntry{
		{TS: at(90 * time.Minute), Action: leasedo.AuditJoin, PRNumber: 1},
		{TS: at(90 * time.Minute), Action: leasedo.AuditJoin, PRNumber: 2},
		{TS: at(30 * time.Minute), Action: leasedo.AuditRemove, PRNumber: 2},
	}}
	st := computeStats([]leasedo.Activity{a}, now)
	// Hourly points: 2 h ago 0, 1 h ago 2, now 1.
	svg := string(st.SVG[0])
	if !strings.Contains(svg, "now 1") || !strings.Contains(svg, `text-anchor="end">2</text>`) {
		t.Fatalf("queue picture (want a top of 2, now 1): %s", svg)
	}
}

// Entries fed through POST /event show their base branch (or that none
// was given), and audit rows without a reason say what their action means;
// the page's JSON twin carries the pictures' figures.
func TestDashboardShowsBaseAndReasons(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	for _, body := range []string{
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"labeled","prNumber":1,"details":{"sha":"aaa","base":"release"}}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"labeled","prNumber":2,"details":{"sha":"bbb"}}`,
	} {
		resp, err := http.Post(h.admin+"/event", "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /event: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	resp, err := http.Get(h.admin + "/repos/1/octo/app")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`class="mono">release</td>`, `title="fed through POST /event without details.base">not given</td>`,
		"joined the queue (trigger label", `<svg class="chart"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	var v RepoView
	if code := getJSON(t, h.admin+"/repos/1/octo/app.json", &v); code != http.StatusOK || v.Stats == nil || v.Stats.QueueNow != 2 {
		t.Fatalf("JSON: %d %+v", code, v.Stats)
	}
}
