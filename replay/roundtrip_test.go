package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

const roundTripSecret = "round-trip secret"

// liveApp is the real app.App (listeners, SQLite file, engine, cron, forge
// client) serving with --record, against a fake GitHub.
type liveApp struct {
	t      *testing.T
	app    *app.App
	gh     *fakegithub.Server
	clk    *leasedo.ManualClock
	url    string
	record string
	db     string
}

func startLiveApp(t *testing.T, withGitHub bool) *liveApp {
	t.Helper()
	dir := t.TempDir()
	l := &liveApp{t: t, clk: leasedo.NewManualClock(replayEpoch), record: filepath.Join(dir, "recorded"), db: filepath.Join(dir, "mergegate.db")}
	cfg := app.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DB: l.db,
		WebhookSecret: roundTripSecret, ReconcileEvery: time.Hour, LeaseTTL: 30 * time.Second, LeaseDead: 90 * time.Second,
		TriggerLabel: "automerge", AutoMerge: true, MergeMethod: "merge", RecordDir: l.record,
		// Time is the deliveries', as in an offline replay; retries are due at once.
		Clock: stillClock{l.clk},
	}
	if withGitHub {
		l.gh = fakegithub.New(t)
		key := filepath.Join(dir, "app.pem")
		if err := os.WriteFile(key, l.gh.PrivateKeyPEM(), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg.AppID, cfg.PrivateKeyPath, cfg.GitHubURL = l.gh.AppID(), key, l.gh.URL()
	}
	a, err := app.New(context.Background(), cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	l.app = a
	// The cron's start-up pass runs first, as in app's test harness: a resync
	// racing the first deliveries would make the state depend on timing.
	testkit.Eventually(t, "the start-up reconcile pass", func() bool { return a.Cron.Runs() >= 1 })
	pub, _ := a.Addrs()
	l.url = "http://" + pub + "/webhook"
	t.Cleanup(func() { l.stop() })
	return l
}

func (l *liveApp) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l.app.Shutdown(ctx) //nolint:errcheck
}

// send posts a delivery over HTTP, signed, as GitHub does.
func (l *liveApp) send(rec app.Recorded, body []byte) (int, webhookAnswer) {
	l.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, l.url, bytes.NewReader(body))
	webhook.SignDelivery(req.Header, roundTripSecret, rec.Event, rec.Delivery, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var a webhookAnswer
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &a)
	return resp.StatusCode, a
}

func (l *liveApp) settle() {
	l.t.Helper()
	if err := waitIdle(context.Background(), l.app, 15*time.Second); err != nil {
		l.t.Fatal(err)
	}
}

// TestReplayRoundTrip is the round trip of docs/replay.md for every scenario: the
// real app.App serves with --record, against a fake GitHub built from the
// deliveries as an offline replay builds it; the scenario's deliveries are
// sent to it over HTTP; then the folder it recorded is replayed offline.
// Both the live app.App's final state and the offline replay of its recording
// must be the scenario's expected.golden, byte for byte.
func TestReplayRoundTrip(t *testing.T) {
	for _, name := range scenarioDirs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(scenariosDir, name)
			want, err := os.ReadFile(filepath.Join(dir, goldenFile))
			if err != nil {
				t.Fatal(err)
			}
			in, _, err := Load([]string{dir}, true)
			if err != nil {
				t.Fatal(err)
			}

			l := startLiveApp(t, true)
			drv := newDriver(l.gh, l.clk, in.Scenario, replayEpoch)
			stored := 0
			for i, rec := range in.Deliveries {
				body, err := drv.before(rec)
				if err != nil {
					t.Fatal(err)
				}
				status, answer := l.send(rec, body)
				if status != http.StatusAccepted {
					t.Fatalf("%s answered %d %+v", in.Files[i], status, answer)
				}
				if answer.Result == "stored" {
					stored++
				}
				drv.after(rec, body, status, answer)
				l.settle()
			}
			live, err := drv.state(context.Background(), l.app.Store)
			if err != nil {
				t.Fatal(err)
			}
			liveJSON, _ := json.MarshalIndent(live, "", "  ")
			if got := append(liveJSON, '\n'); !bytes.Equal(got, want) {
				t.Errorf("the live app.App's final state differs from %s:\n%s", goldenFile, lineDiff(string(want), string(got)))
			}
			l.stop()

			// The recording: one file per stored delivery, in arrival order,
			// each the delivery as received.
			recorded, _, err := Load([]string{l.record}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(recorded.Deliveries) != stored {
				t.Fatalf("recorded %d deliveries, want the %d stored (duplicates are not recorded)", len(recorded.Deliveries), stored)
			}
			j := 0
			seen := map[string]bool{}
			for _, rec := range in.Deliveries {
				if seen[rec.Delivery] {
					continue
				}
				seen[rec.Delivery] = true
				got := recorded.Deliveries[j]
				if got.Event != rec.Event || got.Delivery != rec.Delivery || !bytes.Equal(compactJSON(got.Payload), compactJSON(rec.Payload)) {
					t.Fatalf("recorded #%d = %s %s, want %s %s with the same payload", j+1, got.Event, got.Delivery, rec.Event, rec.Delivery)
				}
				j++
			}

			paths := []string{l.record}
			if in.Scenario.Required != nil || in.Scenario.Behind != nil || in.Scenario.Files != nil || in.Scenario.Roles != nil {
				paths = append(paths, filepath.Join(dir, ScenarioFile))
			}
			if got := replayDir(t, paths...); !bytes.Equal(got, want) {
				t.Fatalf("the offline replay of the recording differs from %s:\n%s", goldenFile, lineDiff(string(want), string(got)))
			}
		})
	}
}

// TestRecordWritesAcceptedDeliveriesOnly: serve --record writes what was
// stored, named in arrival order, without signature or secret; not a
// refused delivery, a ping or a redelivery.
func TestRecordWritesAcceptedDeliveriesOnly(t *testing.T) {
	l := startLiveApp(t, false)
	pr := []byte(`{"action":"labeled","number":5,"pull_request":{"number":5,"state":"open","draft":false,"labels":[{"name":"automerge"}],"head":{"sha":"` + sha1A + `"},"base":{"ref":"main"},"body":"a < b && c > d"},"repository":{"full_name":"o/r"},"installation":{"id":7}}`)
	post := func(event, id string, body []byte, secret string) int {
		req, _ := http.NewRequest(http.MethodPost, l.url, bytes.NewReader(body))
		webhook.SignDelivery(req.Header, secret, event, id, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		event, id string
		body      []byte
		secret    string
		want      int
	}{
		{"pull_request", "d-1", pr, roundTripSecret, 202},
		{"pull_request", "d-1", pr, roundTripSecret, 202}, // redelivery
		{"pull_request", "d-2", pr, "wrong secret", 401},
		{"ping", "d-3", []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`), roundTripSecret, 200},
		{"push", "d-4", []byte(`{"ref":"refs/heads/main","after":"` + sha2A + `","repository":{"full_name":"o/r"}}`), roundTripSecret, 400}, // no installation
		{"status", "d-5", []byte(`{"sha":"` + sha1A + `","context":"ci","state":"success","repository":{"full_name":"o/r"},"installation":{"id":7}}`), roundTripSecret, 202},
	} {
		if got := post(c.event, c.id, c.body, c.secret); got != c.want {
			t.Fatalf("%s %s answered %d, want %d", c.event, c.id, got, c.want)
		}
	}
	l.settle()
	entries, err := os.ReadDir(l.record)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := "000001-pull_request-d-1.json,000002-status-d-5.json"; strings.Join(names, ",") != want {
		t.Fatalf("recorded files %v, want %s", names, want)
	}
	raw, err := os.ReadFile(filepath.Join(l.record, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(roundTripSecret)) || bytes.Contains(bytes.ToLower(raw), []byte("signature")) {
		t.Fatalf("a recorded delivery carries the secret or a signature:\n%s", raw)
	}
	rec, err := ReadRecorded(filepath.Join(l.record, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Event != "pull_request" || rec.Delivery != "d-1" || rec.Headers["X-GitHub-Event"] != "pull_request" || rec.Headers["X-GitHub-Delivery"] != "d-1" {
		t.Fatalf("recorded %+v", rec)
	}
	// The payload as received: the same JSON text once compacted, which is
	// what replay signs and sends.
	if got := compactJSON(rec.Payload); !bytes.Equal(got, pr) {
		t.Fatalf("recorded payload\n%s\nwant as received\n%s", got, pr)
	}

	// A restart continues the numbering.
	r, err := app.NewRecorder(l.record)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Record(leasedo.Delivery{ID: "d-6", Event: "status", Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.record, "000003-status-d-6.json")); err != nil {
		t.Fatal(err)
	}
}
