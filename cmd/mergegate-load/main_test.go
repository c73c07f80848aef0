package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
)

// binPath is a mergegate binary, built once, for the tests that load one.
var binPath string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, "../mergegate", &binPath) }

const e2eSecret = "load-test-secret"

// startServer runs `mergegate serve` on db until the test ends.
func startServer(t *testing.T, db string) *testkit.Server {
	t.Helper()
	return testkit.StartServer(t, binPath, "--db", db, "--webhook-secret", e2eSecret)
}

func TestLatencyHistogram(t *testing.T) {
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

func TestRefusesNonLoopbackAndBadFlags(t *testing.T) {
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
		{"--webhook-secret", "s", "--url", "http://127.0.0.1:1/webhook,http://example.com/webhook"},
		{"--webhook-secret", "s", "--url", "http://127.0.0.1:1/webhook", "--admin-url", "http://127.0.0.1:2,http://10.0.0.1:8081"},
		{"--webhook-secret", "s", "--url", ","},
	} {
		var out, errb bytes.Buffer
		t.Setenv("GITHUB_WEBHOOK_SECRET", "")
		if code := run(args, &out, &errb); code != 2 {
			t.Fatalf("mergegate-load %q: exit %d, want 2\n%s", args, code, errb.String())
		}
	}
}

// A short run against the real binary: every 202 is processed, and the
// report has both targets and their ratio.
func TestAgainstTheBinary(t *testing.T) {
	rep, out, errb := loadBinary(t, "--count", "300", "--duration", "10s", "--repos", "7")
	if rep.Bare == nil || rep.Mergegate == nil || rep.Bare.Acked != 300 || rep.Mergegate.Acked != 300 || rep.IngestRatio <= 0 {
		t.Fatalf("report: %s", out.String())
	}
	p := rep.Mergegate.Processing
	if p == nil || p.Processed != 300 || p.CatchUpSeconds < 0 || p.Failed != 0 || p.RSSEndMB <= 0 {
		t.Fatalf("processing: %s", out.String())
	}
	if !strings.Contains(errb.String(), "mergegate-load: mergegate done") {
		t.Fatalf("stderr: %s", errb.String())
	}
}

// --rounds alternates the targets: each round's p99 ratio is reported, and
// the totals (counts, processing, latencies) are over every round.
func TestRounds(t *testing.T) {
	rep, out, _ := loadBinary(t, "--count", "100", "--rounds", "3", "--repos", "5")
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

// loadBinary runs the load tool at 400/s against a fresh server of the
// real binary, with args added, and returns its JSON report, its output
// and its stderr.
func loadBinary(t *testing.T, args ...string) (rep report, out, errb *bytes.Buffer) {
	t.Helper()
	s := startServer(t, t.TempDir()+"/load.db")
	out, errb = new(bytes.Buffer), new(bytes.Buffer)
	code := run(append([]string{"--url", s.Pub + "/webhook", "--admin-url", s.Admin, "--webhook-secret", e2eSecret,
		"--rate", "400/s", "--poll", "100ms", "--drain", "20s", "--json"}, args...), out, errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	return rep, out, errb
}

// Several --url (replicas of one mergegate): deliveries go round them one
// by one, and processing adds up every --admin-url's applied count. Two
// servers on databases of their own stand in for replicas here: each gets
// every other delivery.
func TestSeveralURLsShareTheLoad(t *testing.T) {
	a := startServer(t, t.TempDir()+"/a.db")
	b := startServer(t, t.TempDir()+"/b.db")
	var out, errb bytes.Buffer
	code := run([]string{"--url", a.Pub + "/webhook," + b.Pub + "/webhook", "--admin-url", a.Admin + "," + b.Admin,
		"--webhook-secret", e2eSecret, "--rate", "400/s", "--poll", "100ms", "--drain", "20s", "--json",
		"--count", "300", "--duration", "10s", "--repos", "7", "--bare=false"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	m := rep.Mergegate
	if m == nil || m.Acked != 300 || m.URL != a.Pub+"/webhook,"+b.Pub+"/webhook" {
		t.Fatalf("report: %s", out.String())
	}
	if p := m.Processing; p == nil || p.Processed != 300 || p.Replicas != 2 || p.CatchUpSeconds < 0 || p.Failed != 0 {
		t.Fatalf("processing: %s", out.String())
	}
	for _, s := range []string{a.Admin, b.Admin} {
		res, err := http.Get(s + "/deliveries/stats")
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Applied int64 `json:"appliedSinceStart"`
		}
		json.NewDecoder(res.Body).Decode(&st) //nolint:errcheck
		res.Body.Close()
		if st.Applied != 150 {
			t.Errorf("%s applied %d, want every other delivery: 150", s, st.Applied)
		}
	}
	var text bytes.Buffer
	rep.print(&text)
	if !strings.Contains(text.String(), "2 replicas added up") {
		t.Fatalf("text report:\n%s", text.String())
	}
}

func TestSplitList(t *testing.T) {
	got := splitList(" http://127.0.0.1:1/webhook,, http://127.0.0.1:2/webhook ,")
	if len(got) != 2 || got[0] != "http://127.0.0.1:1/webhook" || got[1] != "http://127.0.0.1:2/webhook" {
		t.Fatalf("splitList = %q", got)
	}
}
