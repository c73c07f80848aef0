package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/webhook"
)

// BenchmarkIngest compares mergegate's POST /webhook (verify, store durably
// with group commit, 202) with a bare handler that only checks the HMAC and
// answers 202, in the same run, with concurrent clients sending signed
// ~24 KB pull_request deliveries over loopback HTTP. It reports
// deliveries/s and p99 latency for each.
func BenchmarkIngest(b *testing.B) {
	body := benchBody(b)
	secrets, _ := webhook.ParseSecrets("bench-secret")
	sig := webhook.Sign("bench-secret", body)
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body) //nolint:errcheck
		if webhook.Verify(secrets, buf.Bytes(), r.Header.Get("X-Hub-Signature-256")) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	b.Run("bare", func(b *testing.B) { runIngest(b, bare, body, sig) })
	for _, sync := range []string{"normal", "full"} {
		b.Run("mergegate-sync-"+sync, func(b *testing.B) {
			db, err := leasedo.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), leasedo.Options{Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			store := leasedo.NewStore(db, leasedo.Config{})
			inbox := store.NewInbox(0)
			defer inbox.Close()
			h := webhook.NewHandler(webhook.HandlerConfig{Secrets: secrets, Inbox: inbox, Logger: zerolog.Nop()})
			runIngest(b, h, body, sig)
		})
	}
}

func benchBody(b *testing.B) []byte {
	raw := testkit.ReadTestdata(b, "github-webhooks", "pull_request", "labeled.with-organization.payload.json")
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		b.Fatal(err)
	}
	m["installation"] = map[string]any{"id": 1}
	compact, _ := json.Marshal(m)
	// Pad the PR's description to make a 24 KB delivery.
	if pad := 24<<10 - len(compact); pad > 0 {
		m["pull_request"].(map[string]any)["body"] = strings.Repeat("x", pad)
	}
	out, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

var benchSeq atomic.Int64

func runIngest(b *testing.B, h http.Handler, body []byte, sig string) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(body)))
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "pull_request")
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", benchSeq.Add(1)))
			req.Header.Set("X-Hub-Signature-256", sig)
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // reuse the connection
			resp.Body.Close()
			local = append(local, time.Since(t0))
			if resp.StatusCode != http.StatusAccepted {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}
