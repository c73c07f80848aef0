package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/leasedo"
)

// BenchmarkVerify24KB verifies a typical 24 KB delivery, with one secret and
// with two (during a rotation).
func BenchmarkVerify24KB(b *testing.B) {
	body := randomBody(24 << 10)
	sig := Sign(testSecret, body)
	for _, list := range []string{testSecret, "old-secret," + testSecret} {
		s, err := ParseSecrets(list)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(map[int]string{1: "1secret", 2: "2secrets"}[s.Len()], func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if err := Verify(s, body, sig); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// compactFixture is an example as GitHub would send it (compact JSON).
func compactFixture(b *testing.B, rel string) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, readFixture(b, rel)); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkTranslate translates deliveries as GitHub sends them (compact,
// ~24 KB for a pull_request).
func BenchmarkTranslate(b *testing.B) {
	for _, c := range []struct {
		name, event, file, tenant string
		events                    int
	}{
		{"pull_request-opened", "pull_request", "pull_request/opened.payload.json", "1", 1},
		{"pull_request-labeled", "pull_request", "pull_request/labeled.payload.json", "1", 1},
		{"check_suite-completed", "check_suite", "check_suite/completed.payload.json", "1", 1},
	} {
		body := compactFixture(b, c.file)
		d := leasedo.Delivery{ID: "bench", Event: c.event, Tenant: c.tenant, Repo: helloWorld, Body: body}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				tr, err := Translate(d, bugTrigger)
				if err != nil || len(tr.Events) != c.events {
					b.Fatal(tr, err)
				}
			}
		})
	}
}

// BenchmarkParseEnvelope24KB reads a delivery's envelope as the handler
// does, before the 202.
func BenchmarkParseEnvelope24KB(b *testing.B) {
	body := readFixture(b, "pull_request/labeled.with-organization.payload.json") // as stored: pretty-printed
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseEnvelope(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandler runs one delivery through the whole handler: read,
// verify, parse, store in the fake inbox (the same id: a duplicate after the
// first, so the map does not grow).
func BenchmarkHandler(b *testing.B) {
	body := compactFixture(b, "pull_request/opened.payload.json")
	th := newTestHandler(b, func(c *HandlerConfig) { c.OnStored, c.Logger = nil, zerolog.Nop() })
	d := delivery{event: "pull_request", id: "bench", body: body}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if w := th.serve(d); w.Code != http.StatusAccepted {
			b.Fatal(w.Code)
		}
	}
}
