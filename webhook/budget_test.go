package webhook

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// slowRequest starts a request whose body the test feeds by hand; the
// handler runs on its own goroutine until the body ends.
type slowRequest struct {
	pw   *io.PipeWriter
	w    *httptest.ResponseRecorder
	done chan struct{}
}

func startSlow(h http.Handler, d delivery, declared int64) *slowRequest {
	pr, pw := io.Pipe()
	r := d.request()
	r.Body, r.ContentLength = pr, declared
	s := &slowRequest{pw: pw, w: httptest.NewRecorder(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		h.ServeHTTP(s.w, r)
		pr.Close()
	}()
	return s
}

// TestBodiesReserveWhatArrivesNotWhatIsDeclared: a request that declares
// 25 MiB and sends a few bytes holds one small step of the budget, not
// 25 MiB; the budget is given back when the handler returns.
func TestBodiesReserveWhatArrivesNotWhatIsDeclared(t *testing.T) {
	budget := NewBudget(DefaultBodyBudget)
	th := newTestHandler(t, func(c *HandlerConfig) { c.Budget = budget })
	s := startSlow(th.h, delivery{event: "pull_request", id: "slow", body: []byte("{")}, MaxBody)
	if _, err := s.pw.Write([]byte("{")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the slow body to be read", func() bool { n, _ := budget.InUse(); return n > 0 })
	if n, _ := budget.InUse(); n > maxFirstStep {
		t.Fatalf("a body declaring 25 MiB that sent 1 byte holds %d bytes of the budget, want at most %d", n, maxFirstStep)
	}
	s.pw.CloseWithError(io.ErrUnexpectedEOF)
	<-s.done
	if n, _ := budget.InUse(); n != 0 {
		t.Fatalf("budget still holds %d bytes after the request ended", n)
	}
}

// TestFullBudgetWaitsThen503: beyond the budget a request waits for room;
// room freed in time lets it through (202), a wait that runs out is
// answered 503 with Retry-After, and nothing is stored.
func TestFullBudgetWaitsThen503(t *testing.T) {
	budget := NewBudget(maxFirstStep)
	timers := make(chan chan time.Time, 4)
	th := newTestHandler(t, func(c *HandlerConfig) {
		c.Budget = budget
		c.after = func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time, 1)
			timers <- ch
			return ch
		}
	})
	body := []byte(minimal)

	// A slow client holds the whole budget.
	hog := startSlow(th.h, delivery{event: "pull_request", id: "hog", body: []byte("x")}, MaxBody)
	hog.pw.Write([]byte("{")) //nolint:errcheck
	testkit.Eventually(t, "the hog to hold the budget", func() bool { n, _ := budget.InUse(); return n == maxFirstStep })

	// A signed delivery waits; its wait runs out: 503, Retry-After.
	late := make(chan *httptest.ResponseRecorder)
	go func() { late <- th.serve(delivery{event: "pull_request", id: "late", body: body}) }()
	timer := <-timers
	testkit.Eventually(t, "the delivery to wait", func() bool { return budget.Waiting() == 1 })
	timer <- time.Time{}
	w := <-late
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if msg := errorOf(t, w); !strings.Contains(msg, "retry later") {
		t.Errorf("error %q", msg)
	}

	// Another waits, and the hog's end makes room in time: 202.
	go func() { late <- th.serve(delivery{event: "pull_request", id: "in-time", body: body}) }()
	<-timers
	testkit.Eventually(t, "the delivery to wait", func() bool { return budget.Waiting() == 1 })
	hog.pw.CloseWithError(io.ErrUnexpectedEOF)
	<-hog.done
	if w := <-late; w.Code != http.StatusAccepted {
		t.Fatalf("after room was made: status %d (%s), want 202", w.Code, w.Body)
	}
	if _, ok := th.inbox.get("late"); ok || th.inbox.len() != 1 {
		t.Fatalf("stored %d deliveries; want only in-time", th.inbox.len())
	}
	if n, _ := budget.InUse(); n != 0 {
		t.Fatalf("budget holds %d bytes after every request ended", n)
	}
}

// TestLargestDeliveryFitsTheDefaultBudget: a delivery of exactly 25 MiB,
// read in steps, is accepted with the default budget.
func TestLargestDeliveryFitsTheDefaultBudget(t *testing.T) {
	budget := NewBudget(DefaultBodyBudget)
	th := newTestHandler(t, func(c *HandlerConfig) { c.Budget = budget })
	prefix := `{"action":"opened","installation":{"id":7},"repository":{"full_name":"o/r"},"pad":"`
	pad := int(MaxBody) - len(prefix) - 2
	body := []byte(prefix + strings.Repeat("x", pad) + `"}`)
	for _, hide := range []bool{false, true} {
		d := delivery{event: "pull_request", id: fmt.Sprintf("big-%v", hide), body: body}
		r := d.request()
		if hide {
			r.Body, r.ContentLength = io.NopCloser(hideLength{bytes.NewReader(body)}), -1
		}
		w := httptest.NewRecorder()
		th.h.ServeHTTP(w, r)
		if w.Code != http.StatusAccepted {
			t.Fatalf("25 MiB delivery (length hidden: %v): status %d (%s)", hide, w.Code, w.Body)
		}
	}
	if _, peak := budget.InUse(); peak > DefaultBodyBudget {
		t.Fatalf("peak %d over the budget", peak)
	}
}

// TestSlowUnauthenticatedConnectionsHoldLittle is the attack the body
// budget is for: 200 unauthenticated connections declare 25 MiB and send
// one byte, over a real listener, while signed deliveries are stored in a
// real SQLite inbox and acknowledged. The heap must not grow by what was
// declared (5 GB).
func TestSlowUnauthenticatedConnectionsHoldLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 200 connections")
	}
	inbox := testkit.Store(t, leasedo.Config{}).NewInbox(0)
	defer inbox.Close()
	secrets, _ := ParseSecrets(testSecret)
	budget := NewBudget(DefaultBodyBudget)
	h := NewHandler(HandlerConfig{Secrets: secrets, Inbox: inbox, Logger: zerolog.Nop(), Budget: budget})
	srv := httptest.NewServer(h)
	defer srv.Close()

	heap0, rss0 := memory(t)
	const slow = 200
	conns := make([]net.Conn, 0, slow)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for i := range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /webhook HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
			"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow-%d\r\nX-Hub-Signature-256: sha256=%064d\r\n"+
			"Content-Length: %d\r\n\r\n{", addr, i, 0, MaxBody)
	}
	testkit.Eventually(t, "every slow body to be read", func() bool { n, _ := budget.InUse(); return n >= slow*minFirstStep })

	// Signed deliveries are still acknowledged meanwhile.
	body := []byte(minimal)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhook", bytes.NewReader(body))
			delivery{event: "pull_request", id: fmt.Sprintf("signed-%d", i), body: body}.setHeaders(req.Header)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("signed delivery %d: status %d, want 202", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()

	heap1, rss1 := memory(t)
	used, peak := budget.InUse()
	t.Logf("%d slow connections: budget %d KiB (peak %d KiB); heap %.1f -> %.1f MiB; RSS %.1f -> %.1f MiB",
		slow, used>>10, peak>>10, mib(heap0), mib(heap1), mib(rss0), mib(rss1))
	if grown := int64(heap1) - int64(heap0); grown > 64<<20 {
		t.Fatalf("heap grew by %.0f MiB for %d connections that sent one byte each", mib(uint64(grown)), slow)
	}
}

// memory returns the live heap (after a collection) and the process's RSS.
func memory(t *testing.T) (heap, rss uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if p, err := procfs.Self(); err == nil {
		if st, err := p.Stat(); err == nil {
			rss = uint64(st.ResidentMemory())
		}
	}
	return ms.HeapAlloc, rss
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
