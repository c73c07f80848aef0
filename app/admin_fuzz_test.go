package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// FuzzAdminEvent: any body POSTed to /event through the real admin handler
// on a real store is answered without a panic and without a 5xx, in JSON,
// and never leaves a lease held. A 409 only ever comes from a lease held
// before the call (never here: each call starts with every lease free).
func FuzzAdminEvent(f *testing.F) {
	for _, seed := range []string{
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"labeled","prNumber":42,"details":{"sha":"abc123"}}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"closed","prNumber":42}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"synchronize","prNumber":42,"details":{"sha":"def"}}`,
		`{"eventType":"check_suite","tenant":"1","repo":"octo/app","action":"completed","details":{"sha":"def","gateResult":"success"}}`,
		`{"eventType":"status","tenant":"1","repo":"octo/app","details":{"sha":"def","gateResult":"nope"}}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"opened","prNumber":7}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","prNumber":-1}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","prNumber":1e400}`,
		`{"eventType":"pull_request","tenant":1,"repo":"octo/app"}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","details":[]}`,
		`{"eventType":"pull_request","tenant":"1","repo":"octo/app","action":"labeled","prNumber":9223372036854775807,"details":{"sha":"s","queuedAt":-9223372036854775808}}`,
		`{"eventType":"x","tenant":"\u0000","repo":"\ud800/é","action":"labeled","prNumber":3,"details":{"sha":"\u0000"}}`,
		`{"tenant":"1"}`, `null`, `[]`, `"s"`, `{`, ``, `{"eventType":"pull_request"}{}`,
	} {
		f.Add([]byte(seed))
	}
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	store := testkit.Store(f, leasedo.Config{Clock: clk})
	h := NewAdminHandler(AdminConfig{Store: store, Logger: zerolog.Nop()})
	f.Fuzz(func(t *testing.T, body []byte) {
		clk.Advance(time.Millisecond)
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8081/event", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("POST /event %q: status %d: %s", body, rec.Code, rec.Body.String())
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST /event %q: answer is not JSON: %q", body, rec.Body.String())
		}
		var ev leasedo.Event
		if json.Unmarshal(body, &ev) != nil || ev.Tenant == "" || ev.Repo == "" {
			return
		}
		st, err := store.Check(context.Background(), ev.Key())
		if err != nil || st.Locked || st.HeldBy != "" {
			t.Fatalf("after POST /event %q (%d): lease %+v, %v", body, rec.Code, st, err)
		}
	})
}
