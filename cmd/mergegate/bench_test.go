package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

// The generated deliveries are GitHub's examples, edited: each parses and
// translates into the queue event its turn calls for, for its repository.
func TestBenchDeliveries(t *testing.T) {
	gen, err := newDeliveryGen("", 3, 2, 77)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	// Repository i%3; PRs take turns; rounds: labeled, synchronize, check_suite.
	want := []struct {
		event, action string
		pr            int
	}{
		{"pull_request", "labeled", 1}, {"pull_request", "labeled", 1}, {"pull_request", "labeled", 1},
		{"pull_request", "labeled", 2}, {"pull_request", "labeled", 2}, {"pull_request", "labeled", 2},
		{"pull_request", "synchronize", 1}, {"pull_request", "synchronize", 1}, {"pull_request", "synchronize", 1},
		{"pull_request", "synchronize", 2}, {"pull_request", "synchronize", 2}, {"pull_request", "synchronize", 2},
		{"check_suite", "completed", 0}, {"check_suite", "completed", 0}, {"check_suite", "completed", 0},
		{"check_suite", "completed", 0}, {"check_suite", "completed", 0}, {"check_suite", "completed", 0},
		{"pull_request", "labeled", 1},
	}
	shas := map[string]string{} // repo#pr -> head after synchronize
	for i, w := range want {
		event, id, body := gen.delivery(0, int64(i))
		if ids[id] {
			t.Fatalf("delivery %d: id %s repeats", i, id)
		}
		ids[id] = true
		meta, err := webhook.Parse(event, body)
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		repo := "bench-org/repo-000" + string(rune('0'+i%3))
		if event != w.event || meta.Tenant != "77" || meta.Repo != repo {
			t.Fatalf("delivery %d: %s %+v, want %s for %s under 77", i, event, meta, w.event, repo)
		}
		tr, err := webhook.Translate(leasedo.Delivery{ID: id, Event: event, Action: meta.Action, Tenant: meta.Tenant, Repo: meta.Repo, Body: body}, rules.DefaultOptions())
		if err != nil || len(tr.Events) != 1 || tr.Ignored != "" {
			t.Fatalf("delivery %d: translation %+v, %v", i, tr, err)
		}
		ev := tr.Events[0]
		if ev.Action != w.action || ev.PRNumber != w.pr || len(ev.Details.Sha) != 40 {
			t.Fatalf("delivery %d: event %+v %+v, want %s #%d", i, ev, ev.Details, w.action, w.pr)
		}
		switch w.action {
		case "synchronize":
			shas[repo+string(rune('0'+w.pr))] = ev.Details.Sha
		case "completed": // at the head the synchronize set
			pr := 1 + (i-12)/3
			if got := shas[repo+string(rune('0'+pr))]; got != ev.Details.Sha {
				t.Fatalf("delivery %d: check_suite at %s, want the new head %s", i, ev.Details.Sha, got)
			}
		}
	}
}

func TestBenchLatencyHistogram(t *testing.T) {
	var h latHist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Millisecond)
	}
	r := h.report()
	for _, c := range []struct{ got, want float64 }{{r.P50, 500}, {r.P90, 900}, {r.P99, 990}, {r.Max, 1000}} {
		if c.got < c.want*0.98 || c.got > c.want*1.02 {
			t.Fatalf("quantile %.1f ms, want %.0f ms ± 2%% (%+v)", c.got, c.want, r)
		}
	}
	for _, ns := range []int64{0, 1, 63, 64, 65, 1000, 1 << 20, 1<<40 + 12345} {
		b := latBucket(ns)
		if v := latValue(b); v > ns || float64(ns-v) > float64(ns)/32+1 {
			t.Fatalf("bucket of %d ns starts at %d", ns, v)
		}
	}
}

func TestBenchRefusesNonLoopbackAndBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--webhook-secret", "s", "--url", "http://example.com/webhook"},
		{"--webhook-secret", "s", "--url", "http://10.0.0.1:8080/webhook"},
		{"--webhook-secret", "s", "--url", "https://127.0.0.1/webhook"},
		{"--webhook-secret", "s", "--admin-url", "http://192.168.1.1:8081", "--url", "http://127.0.0.1:1/webhook", "--bare=false", "--duration", "1ms"},
		{"--url", "http://127.0.0.1:1/webhook"}, // unsigned
		{"--webhook-secret", "s", "--rate", "fast"},
		{"--webhook-secret", "s", "--duration", "3h"},
		{"--webhook-secret", "s", "--count", "-1"},
		{"--webhook-secret", "s", "--rounds", "0"},
	} {
		var out, errb bytes.Buffer
		t.Setenv("GITHUB_WEBHOOK_SECRET", "")
		if code := run(append([]string{"bench"}, args...), &out, &errb); code != 2 {
			t.Fatalf("bench %q: exit %d, want 2\n%s", args, code, errb.String())
		}
	}
}

// A short run against the real binary: every 202 is processed, and the
// report has both targets and their ratio.
func TestBenchAgainstTheBinary(t *testing.T) {
	rep, out, errb := benchBinary(t, "--count", "300", "--duration", "10s", "--repos", "7")
	if rep.Bare == nil || rep.Mergegate == nil || rep.Bare.Acked != 300 || rep.Mergegate.Acked != 300 || rep.IngestRatio <= 0 {
		t.Fatalf("report: %s", out.String())
	}
	p := rep.Mergegate.Processing
	if p == nil || p.Processed != 300 || p.CatchUpSeconds < 0 || p.Failed != 0 || p.RSSEndMB <= 0 {
		t.Fatalf("processing: %s", out.String())
	}
	if !strings.Contains(errb.String(), "bench: mergegate done") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

// --rounds alternates the targets: each round's p99 ratio is reported, and
// the totals (counts, processing, latencies) are over every round.
func TestBenchRounds(t *testing.T) {
	rep, out, _ := benchBinary(t, "--count", "100", "--rounds", "3", "--repos", "5")
	if rep.Bare == nil || rep.Mergegate == nil || rep.Bare.Acked != 300 || rep.Mergegate.Acked != 300 || rep.Mergegate.Sent != 300 {
		t.Fatalf("totals: %s", out.String())
	}
	if p := rep.Mergegate.Processing; p == nil || p.Processed != 300 || p.Failed != 0 || p.CatchUpSeconds < 0 {
		t.Fatalf("processing over the rounds: %s", out.String())
	}
	if len(rep.Rounds) != 3 {
		t.Fatalf("%d rounds reported: %s", len(rep.Rounds), out.String())
	}
	slowest := 0.0
	for _, r := range rep.Rounds {
		if r.BareP99 <= 0 || r.MergegateP99 <= 0 || math.Abs(r.P99Ratio-r.MergegateP99/r.BareP99) > 1e-9 {
			t.Fatalf("round %+v", r)
		}
		slowest = max(slowest, r.MergegateP99)
	}
	// The p99 over all rounds is within the rounds' (histogram buckets: 1.6%).
	if l := rep.Mergegate.Latency; l.P99 <= 0 || l.P99 > slowest*1.02 || l.Max < l.P99 {
		t.Fatalf("latency over the rounds %+v, slowest round's p99 %.3f", l, slowest)
	}
	var text bytes.Buffer
	rep.print(&text)
	if !strings.Contains(text.String(), "over 3 rounds") || !strings.Contains(text.String(), "median") {
		t.Fatalf("text report:\n%s", text.String())
	}
}

// benchBinary runs the load tool at 400/s against a fresh server of the
// real binary, with args added, and returns its JSON report, its output
// and its stderr.
func benchBinary(t *testing.T, args ...string) (rep benchReport, out, errb *bytes.Buffer) {
	t.Helper()
	s := startServer(t, t.TempDir()+"/bench.db")
	out, errb = new(bytes.Buffer), new(bytes.Buffer)
	code := run(append([]string{"bench", "--url", s.pub + "/webhook", "--admin-url", s.admin, "--webhook-secret", e2eSecret,
		"--rate", "400/s", "--poll", "100ms", "--drain", "20s", "--json"}, args...), out, errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rep, out, errb
}
