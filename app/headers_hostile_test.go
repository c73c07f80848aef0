package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/webhook"
)

// Issue 30, hole 3: a signed delivery whose X-GitHub-Event is not UTF-8
// was stored, and the metrics library panicked on it as a label: the
// process exited. Now it is refused 400 before it is stored, an event
// mergegate does not subscribe to is answered 202 and not stored, and the
// process keeps serving.
func TestHostileEventHeaderDoesNotStopTheProcess(t *testing.T) {
	h := newHarness(t)
	body := h.prPayload("labeled", 1, "a1", "automerge")
	if code := h.send("pull_\xffrequest", body); code != http.StatusBadRequest {
		t.Errorf("non-UTF-8 event answered %d, want 400", code)
	}
	if code := h.sendID("pull_request", "id-\xfe", body); code != http.StatusBadRequest {
		t.Errorf("non-UTF-8 delivery id answered %d, want 400", code)
	}
	if code := h.send(strings.Repeat("x", 65), body); code != http.StatusBadRequest {
		t.Errorf("a 65-byte event answered %d, want 400", code)
	}
	if code := h.send("sponsorship", body); code != http.StatusAccepted {
		t.Errorf("an event not subscribed to answered %d, want 202", code)
	}
	h.settle()
	known, err := h.app.Store.KnownDeliveries(context.Background(), []string{"delivery-1", "delivery-2", "delivery-3", "id-\xfe"})
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != 0 {
		t.Errorf("stored %v, want none of these", known)
	}
	// Still serving, and the metrics say nothing of the request's text.
	h.label(1, "a1")
	h.eventually("the labelled PR queued", func() bool { return len(h.queue()) == 1 })
	text := scrape(t, h)
	if strings.Contains(text, "sponsorship") || strings.Contains(text, "\ufffd") {
		t.Errorf("/metrics carries a request's event name:\n%s", text)
	}
	if !strings.Contains(text, `mergegate_deliveries_total{event="pull_request"`) {
		t.Errorf("/metrics lacks the pull_request delivery")
	}
}

// A delivery stored with an event mergegate does not know (by an older
// version) is counted under event="other".
func TestDeliveryMetricLabelIsBounded(t *testing.T) {
	m := NewMetrics()
	now := time.Now()
	m.delivery("\xff\xfe", "ignored", now, now)
	m.delivery("sponsorship", "ignored", now, now)
	m.delivery("push", "ignored", now, now)
	mf, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range mf {
		if f.GetName() != "mergegate_deliveries_total" {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "event" {
					got = append(got, l.GetValue())
				}
			}
		}
	}
	if strings.Join(got, ",") != "other,push" {
		t.Errorf("event labels = %v, want other,push", got)
	}
}

// Headers are short: 64 KiB of them (Go's default allowed 1 MiB) are
// answered 431 before anything is read.
func TestLongHeadersAreRefused(t *testing.T) {
	h := newHarness(t)
	body := h.prPayload("labeled", 1, "a1", "automerge")
	req, _ := http.NewRequest(http.MethodPost, h.pub+"/webhook", strings.NewReader(string(body)))
	webhook.SignDelivery(req.Header, testSecret, "pull_request", "long-headers", body)
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", strings.Repeat("x", 64<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("64 KiB of headers answered %d, want 431", resp.StatusCode)
	}
}
