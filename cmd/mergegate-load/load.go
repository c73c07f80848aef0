package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/loadgen"
	"github.com/mergegate/mergegate/webhook"
)

// ---- load ---------------------------------------------------------------

// targetReport is one target's figures.
type targetReport struct {
	URL         string         `json:"url"` // several: comma-separated, in the order deliveries went round them
	Sent        int64          `json:"sent"`
	Acked       int64          `json:"acked"` // answered 202
	Statuses    map[string]int `json:"statuses,omitempty"`
	Errors      int64          `json:"errors"` // no answer
	Seconds     float64        `json:"seconds"`
	AckedPerSec float64        `json:"ackedPerSec"`
	Latency     latencyReport  `json:"latencyMs"`
	// Open loop: starts that waited for the in-flight cap, and starts more
	// than 1 ms after their scheduled time; the largest delay.
	LateStarts    int64       `json:"lateStarts"`
	CapWaits      int64       `json:"capWaits"`
	MaxLateMs     float64     `json:"maxLateMs"`
	BytesPerDeliv int64       `json:"bytesPerDelivery"`
	Processing    *procReport `json:"processing,omitempty"`
}

type latencyReport struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// procReport is what GET /deliveries/stats showed of the deliveries' processing.
type procReport struct {
	// Processed during the run (from its start until caught up or the
	// drain timeout); ProcessedPerSec over the same span.
	Processed       int64   `json:"processed"`
	ProcessedPerSec float64 `json:"processedPerSec"`
	// BehindAtEnd: acknowledged but not processed when sending ended.
	BehindAtEnd int64 `json:"behindAtEnd"`
	// CatchUpSeconds after sending ended until every acknowledged delivery
	// was processed; -1 if it did not within --drain.
	CatchUpSeconds float64 `json:"catchUpSeconds"`
	// MaxPending: the most deliveries seen pending (stored, not applied).
	MaxPending int64 `json:"maxPending"`
	Failed     int64 `json:"failedDeliveries"`
	// RSS of the mergegate process (the stats' rssBytes) before
	// and after, and the largest seen, in MB.
	RSSStartMB float64 `json:"rssStartMB"`
	RSSEndMB   float64 `json:"rssEndMB"`
	RSSMaxMB   float64 `json:"rssMaxMB"`
	// Replicas is how many admin listeners these figures add up (1: one
	// process; more: each replica's applied count and RSS, added).
	Replicas int `json:"replicas"`
}

type report struct {
	Rate        float64       `json:"rate"` // 0: max
	Repos       int           `json:"repos"`
	PRs         int           `json:"prsPerRepo"`
	Duration    string        `json:"duration"`
	Count       int           `json:"count"`
	Concurrency int           `json:"concurrency"`
	MaxInflight int           `json:"maxInflight"`
	Bare        *targetReport `json:"bare,omitempty"`        // over every round
	Mergegate   *targetReport `json:"mergegate,omitempty"`   // over every round
	IngestRatio float64       `json:"ingestRatio,omitempty"` // mergegate acked/s ÷ bare acked/s
	P99Ratio    float64       `json:"p99Ratio,omitempty"`    // mergegate p99 ÷ bare p99
	Rounds      []roundReport `json:"rounds,omitempty"`      // with --rounds > 1
}

// roundReport is one round's p99 of each target.
type roundReport struct {
	BareP99      float64 `json:"bareP99Ms"`
	MergegateP99 float64 `json:"mergegateP99Ms"`
	P99Ratio     float64 `json:"p99Ratio"`
}

// mergeTarget adds one round's report r to acc (nil for the first round);
// all holds the latencies of every round so far.
func mergeTarget(acc *targetReport, r targetReport, all *latHist) *targetReport {
	if acc == nil {
		acc = &r
		return acc
	}
	if sent := acc.Sent + r.Sent; sent > 0 {
		acc.BytesPerDeliv = (acc.BytesPerDeliv*acc.Sent + r.BytesPerDeliv*r.Sent) / sent
	}
	acc.Sent += r.Sent
	acc.Acked += r.Acked
	acc.Errors += r.Errors
	acc.Seconds += r.Seconds
	if acc.Seconds > 0 {
		acc.AckedPerSec = float64(acc.Acked) / acc.Seconds
	}
	for k, v := range r.Statuses {
		if acc.Statuses == nil {
			acc.Statuses = map[string]int{}
		}
		acc.Statuses[k] += v
	}
	acc.Latency = all.report()
	acc.LateStarts += r.LateStarts
	acc.CapWaits += r.CapWaits
	acc.MaxLateMs = max(acc.MaxLateMs, r.MaxLateMs)
	if a, p := acc.Processing, r.Processing; a != nil && p != nil {
		// Per second over the rounds' spans: each span is its Processed
		// over its ProcessedPerSec.
		span := 0.0
		for _, x := range []*procReport{a, p} {
			if x.ProcessedPerSec > 0 {
				span += float64(x.Processed) / x.ProcessedPerSec
			}
		}
		a.Processed += p.Processed
		if span > 0 {
			a.ProcessedPerSec = float64(a.Processed) / span
		}
		a.BehindAtEnd = max(a.BehindAtEnd, p.BehindAtEnd)
		if a.CatchUpSeconds >= 0 {
			a.CatchUpSeconds = max(a.CatchUpSeconds, p.CatchUpSeconds)
			if p.CatchUpSeconds < 0 {
				a.CatchUpSeconds = -1
			}
		}
		a.MaxPending = max(a.MaxPending, p.MaxPending)
		a.Failed += p.Failed
		a.RSSEndMB = p.RSSEndMB
		a.RSSMaxMB = max(a.RSSMaxMB, p.RSSMaxMB)
	}
	return acc
}

// loadBare serves the bare handler on loopback and loads it.
func loadBare(ctx context.Context, f config, gen *loadgen.Generator, all *latHist) (targetReport, error) {
	secrets, err := webhook.ParseSecrets(f.secret)
	if err != nil {
		return targetReport{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return targetReport{}, err
	}
	srv := &http.Server{Handler: bareHandler(secrets), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // closed below
	defer srv.Close()
	return runLoad(ctx, f, gen, []string{"http://" + ln.Addr().String() + "/webhook"}, nil, all)
}

// bareHandler checks the HMAC and answers 202: the floor of any webhook
// receiver that reads the body and verifies it.
func bareHandler(secrets webhook.Secrets) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var buf bytes.Buffer
		if r.ContentLength > 0 {
			buf.Grow(int(r.ContentLength))
		}
		if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, webhook.MaxBody)); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if webhook.Verify(secrets, buf.Bytes(), r.Header.Get(webhook.SignatureHeader)) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"result":"stored"}`+"\n") //nolint:errcheck
	})
}

// loadState is shared by the senders of one target.
type loadState struct {
	client   *http.Client
	urls     []string // delivery i goes to urls[i mod len]
	secret   string
	gen      *loadgen.Generator
	base     int64 // first delivery index of this target
	hist     latHist
	all      *latHist // every round's, besides hist (this round's)
	sent     atomic.Int64
	acked    atomic.Int64
	errs     atomic.Int64
	bytes    atomic.Int64
	stMu     sync.Mutex
	statuses map[int]int
	lastAck  atomic.Int64 // unix ns
}

// bodyBufs recycles the senders' request bodies, and copyBufs the buffers
// the bodies are written to the connection through: a load generator
// should disturb the machine it measures as little as it can, and fresh
// ones would be 70 KB of garbage per delivery: at the rates it sends, a
// garbage collection every few milliseconds on the cores mergegate runs on.
var (
	bodyBufs = sync.Pool{New: func() any { return new([]byte) }}
	copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
)

// pooledConn writes a request body from a pooled buffer: net/http hands
// the body to the connection's ReadFrom, which for anything but a file
// allocates a buffer per call.
type pooledConn struct{ net.Conn }

func (c pooledConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, *buf)
}

func (s *loadState) send(ctx context.Context, i int64) {
	bp := bodyBufs.Get().(*[]byte)
	event, id, body := s.gen.AppendDelivery(*bp, s.base, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.urls[i%int64(len(s.urls))], bytes.NewReader(body))
	if err != nil {
		s.errs.Add(1)
		return
	}
	req.Header.Set("User-Agent", "GitHub-Hookshot/mergegate-load")
	webhook.SignDelivery(req.Header, s.secret, event, id, body)
	s.sent.Add(1)
	s.bytes.Add(int64(len(body)))
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		s.errs.Add(1)
		return
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // reuse the connection
	resp.Body.Close()
	took := time.Since(t0)
	if resp.StatusCode == http.StatusAccepted {
		// Accepted after the whole body was read: the transport is done
		// with it. Another answer may come early, while the body is still
		// being written: that buffer is left to the collector.
		*bp = body
		bodyBufs.Put(bp)
		s.acked.Add(1)
		s.hist.add(took)
		if s.all != nil {
			s.all.add(took)
		}
		s.lastAck.Store(time.Now().UnixNano())
		return
	}
	s.stMu.Lock()
	s.statuses[resp.StatusCode]++
	s.stMu.Unlock()
}

var targets atomic.Int64 // each target of a process sends fresh delivery ids

// runLoad sends one target its load, delivery i to urls[i mod n] (several:
// replicas of one mergegate), and, with m, follows the processing.
func runLoad(ctx context.Context, f config, gen *loadgen.Generator, urls []string, m *statsPoller, all *latHist) (targetReport, error) {
	conns := f.maxInflight
	if f.rate == 0 {
		conns = f.concurrency
	}
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return pooledConn{c}, nil
		}}
	defer tr.CloseIdleConnections()
	s := &loadState{client: &http.Client{Transport: tr, Timeout: 30 * time.Second}, urls: urls, secret: f.secret,
		gen: gen, base: targets.Add(1) * 1e9, statuses: map[int]int{}, all: all}
	rep := targetReport{URL: strings.Join(urls, ",")}

	// Warm up the connections (and check the targets answer) before the clock starts.
	for _, u := range urls {
		if err := warmUp(ctx, s.client, u, min(conns, 16)); err != nil {
			return rep, fmt.Errorf("%s: %w", u, err)
		}
	}
	var before statsSample
	var poll *pollLoop
	if m != nil {
		var err error
		if before, err = m.sample(ctx); err != nil {
			return rep, fmt.Errorf("read /deliveries/stats: %w", err)
		}
		poll = startPoll(ctx, m, f.poll, before)
	}

	limit := int64(f.count)
	if limit == 0 {
		limit = maxCount
	}
	runCtx, cancel := context.WithTimeout(ctx, f.duration)
	defer cancel()
	start := time.Now()
	var late, capWaits, maxLate atomic.Int64
	var wg sync.WaitGroup
	if f.rate > 0 {
		sem := make(chan struct{}, f.maxInflight)
		interval := float64(time.Second) / f.rate
	sched:
		for i := int64(0); i < limit; i++ {
			due := start.Add(time.Duration(float64(i) * interval))
			if due.Sub(start) >= f.duration {
				break
			}
			if d := time.Until(due); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-runCtx.Done():
					t.Stop()
					break sched
				case <-t.C:
				}
			}
			waited := false
			select {
			case sem <- struct{}{}:
			default:
				waited = true
				select {
				case sem <- struct{}{}:
				case <-runCtx.Done():
					break sched
				}
			}
			lateBy := time.Since(due)
			if waited {
				capWaits.Add(1)
			}
			if waited || lateBy > time.Millisecond {
				late.Add(1)
			}
			if int64(lateBy) > maxLate.Load() {
				maxLate.Store(int64(lateBy))
			}
			wg.Add(1)
			go func(i int64) {
				defer wg.Done()
				defer func() { <-sem }()
				s.send(ctx, i)
			}(i)
		}
	} else {
		var next atomic.Int64
		for c := 0; c < f.concurrency; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for runCtx.Err() == nil {
					i := next.Add(1) - 1
					if i >= limit {
						return
					}
					s.send(ctx, i)
				}
			}()
		}
	}
	wg.Wait() // in-flight requests finish (bounded by the client timeout)
	end := time.Now()
	elapsed := end.Sub(start)
	if la := s.lastAck.Load(); la > 0 && f.rate == 0 {
		elapsed = time.Unix(0, la).Sub(start)
	}

	rep.Sent, rep.Acked, rep.Errors = s.sent.Load(), s.acked.Load(), s.errs.Load()
	rep.Seconds = elapsed.Seconds()
	if rep.Seconds > 0 {
		rep.AckedPerSec = float64(rep.Acked) / rep.Seconds
	}
	rep.Latency = s.hist.report()
	rep.LateStarts, rep.CapWaits = late.Load(), capWaits.Load()
	rep.MaxLateMs = float64(maxLate.Load()) / 1e6
	if rep.Sent > 0 {
		rep.BytesPerDeliv = s.bytes.Load() / rep.Sent
	}
	if len(s.statuses) > 0 {
		rep.Statuses = map[string]int{}
		for k, v := range s.statuses {
			rep.Statuses[strconv.Itoa(k)] = v
		}
	}
	if poll != nil {
		rep.Processing = poll.finish(ctx, start, end, rep.Acked, f.drain)
		rep.Processing.Replicas = len(m.bases)
	}
	return rep, ctx.Err()
}

func warmUp(ctx context.Context, client *http.Client, url string, n int) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for c := 0; c < n; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ---- processing, from GET /deliveries/stats -----------------------------

// statsPoller reads GET /deliveries/stats of one mergegate, or of each
// replica of one: the applied and failed counts (each process's since
// its start) and the RSS are added up; pending is the database's, the
// same from each, so the largest answer is kept.
type statsPoller struct {
	bases  []string
	token  string
	client *http.Client
}

type statsSample struct {
	at        time.Time
	processed int64 // applied since mergegate started, failed ones not counted
	failed    int64
	pending   int64
	rss       float64 // bytes
}

func (m *statsPoller) sample(ctx context.Context) (statsSample, error) {
	var sum statsSample
	for _, base := range m.bases {
		smp, err := m.sampleOne(ctx, base)
		if err != nil {
			return statsSample{}, fmt.Errorf("%s: %w", base, err)
		}
		sum.at = smp.at
		sum.processed += smp.processed
		sum.failed += smp.failed
		sum.pending = max(sum.pending, smp.pending)
		sum.rss += smp.rss
	}
	return sum, nil
}

func (m *statsPoller) sampleOne(ctx context.Context, base string) (statsSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/deliveries/stats", nil)
	if err != nil {
		return statsSample{}, err
	}
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return statsSample{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return statsSample{}, fmt.Errorf("GET /deliveries/stats: status %d", resp.StatusCode)
	}
	var st app.DeliveryStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return statsSample{}, fmt.Errorf("GET /deliveries/stats: %w", err)
	}
	return statsSample{at: time.Now(), processed: st.AppliedSinceStart, failed: st.FailedSinceStart,
		pending: int64(st.Pending), rss: float64(st.RSSBytes)}, nil
}

// pollLoop samples GET /deliveries/stats while the load runs.
type pollLoop struct {
	m      *statsPoller
	before statsSample
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	all    []statsSample
}

func startPoll(ctx context.Context, m *statsPoller, every time.Duration, before statsSample) *pollLoop {
	p := &pollLoop{m: m, before: before, stop: make(chan struct{}), done: make(chan struct{}), all: []statsSample{before}}
	go func() {
		defer close(p.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if smp, err := m.sample(ctx); err == nil {
					p.mu.Lock()
					p.all = append(p.all, smp)
					p.mu.Unlock()
				}
			}
		}
	}()
	return p
}

// finish stops the periodic polling, then polls often until every
// acknowledged delivery is processed or drain passes.
func (p *pollLoop) finish(ctx context.Context, start, end time.Time, acked int64, drain time.Duration) *procReport {
	close(p.stop)
	<-p.done
	r := &procReport{CatchUpSeconds: -1}
	behind := int64(-1)
	caught := time.Time{}
	last := p.before
	deadline := time.Now().Add(drain)
	for ctx.Err() == nil {
		smp, err := p.m.sample(ctx)
		if err == nil {
			p.all = append(p.all, smp)
			last = smp
			done := smp.processed + smp.failed - p.before.processed - p.before.failed
			if behind < 0 {
				behind = max(acked-done, 0)
			}
			if done >= acked {
				caught = smp.at
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.BehindAtEnd = max(behind, 0)
	stopAt := last.at
	if !caught.IsZero() {
		r.CatchUpSeconds = max(caught.Sub(end).Seconds(), 0)
		stopAt = caught
	}
	r.Processed = last.processed - p.before.processed
	r.Failed = last.failed - p.before.failed
	if secs := stopAt.Sub(start).Seconds(); secs > 0 {
		r.ProcessedPerSec = float64(r.Processed) / secs
	}
	r.RSSStartMB, r.RSSEndMB = p.before.rss/1e6, last.rss/1e6
	for _, smp := range p.all {
		r.MaxPending = max(r.MaxPending, smp.pending)
		r.RSSMaxMB = max(r.RSSMaxMB, smp.rss/1e6)
	}
	return r
}

// ---- latency histogram --------------------------------------------------

// latHist is a log-linear histogram of durations: 64 sub-buckets per power
// of two (under 1.6% error), lock-free.
type latHist struct {
	counts [64 * 64]atomic.Int64
	max    atomic.Int64
	n      atomic.Int64
}

func latBucket(ns int64) int {
	if ns < 64 {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 6 // ns >> e is in [32, 64)
	return e*32 + int(ns>>e)
}

func latValue(b int) int64 {
	if b < 64 {
		return int64(b)
	}
	e := b/32 - 1
	m := b%32 + 32
	return int64(m) << e
}

func (h *latHist) add(d time.Duration) {
	ns := int64(d)
	h.counts[min(latBucket(ns), len(h.counts)-1)].Add(1)
	h.n.Add(1)
	for {
		cur := h.max.Load()
		if ns <= cur || h.max.CompareAndSwap(cur, ns) {
			return
		}
	}
}

func (h *latHist) quantile(q float64) float64 {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(n)))
	var seen int64
	for b := range h.counts {
		seen += h.counts[b].Load()
		if seen >= want {
			return float64(min(latValue(b), h.max.Load())) / 1e6
		}
	}
	return float64(h.max.Load()) / 1e6
}

func (h *latHist) report() latencyReport {
	return latencyReport{P50: h.quantile(0.50), P90: h.quantile(0.90), P99: h.quantile(0.99), Max: float64(h.max.Load()) / 1e6}
}

// ---- output -------------------------------------------------------------

func printTarget(w io.Writer, name string, r targetReport) {
	fmt.Fprintf(w, "mergegate-load: %s done: %d acked of %d sent in %.1fs\n", name, r.Acked, r.Sent, r.Seconds)
}

func (rep report) print(w io.Writer) {
	rate := "max"
	if rep.Rate > 0 {
		rate = strconv.FormatFloat(rep.Rate, 'f', -1, 64) + "/s (open loop)"
	}
	fmt.Fprintf(w, "load: rate %s, %d repositories × %d PRs, duration %s", rate, rep.Repos, rep.PRs, rep.Duration)
	if rep.Count > 0 {
		fmt.Fprintf(w, ", count %d", rep.Count)
	}
	fmt.Fprintln(w)
	rows := []struct {
		name string
		r    *targetReport
	}{{"bare", rep.Bare}, {"mergegate", rep.Mergegate}}
	fmt.Fprintf(w, "%-10s %9s %9s %9s %9s %8s %8s %8s %8s %7s\n", "target", "sent", "acked", "acked/s", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "late")
	for _, row := range rows {
		r := row.r
		if r == nil {
			continue
		}
		errs := r.Errors
		for _, v := range r.Statuses {
			errs += int64(v)
		}
		fmt.Fprintf(w, "%-10s %9d %9d %9.0f %9d %8.2f %8.2f %8.2f %8.1f %7d\n", row.name, r.Sent, r.Acked, r.AckedPerSec,
			errs, r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max, r.LateStarts)
		if len(r.Statuses) > 0 {
			keys := make([]string, 0, len(r.Statuses))
			for k := range r.Statuses {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s×%d", k, r.Statuses[k]))
			}
			fmt.Fprintf(w, "%-10s non-202 answers: %s\n", "", strings.Join(parts, ", "))
		}
	}
	if rep.Mergegate != nil && rep.Mergegate.Processing != nil {
		p := rep.Mergegate.Processing
		catch := "not within --drain"
		if p.CatchUpSeconds >= 0 {
			catch = fmt.Sprintf("%.1fs", p.CatchUpSeconds)
		}
		fmt.Fprintf(w, "processing: %d applied (%.0f/s), %d behind when sending ended, caught up after %s, max pending %d, failed %d\n",
			p.Processed, p.ProcessedPerSec, p.BehindAtEnd, catch, p.MaxPending, p.Failed)
		rss := "mergegate RSS"
		if p.Replicas > 1 {
			rss = fmt.Sprintf("mergegate RSS (%d replicas added up)", p.Replicas)
		}
		fmt.Fprintf(w, "%s: %.1f MB before, %.1f MB after, %.1f MB max\n", rss, p.RSSStartMB, p.RSSEndMB, p.RSSMaxMB)
	}
	if rep.IngestRatio > 0 {
		fmt.Fprintf(w, "ratio mergegate/bare: ingest %.2f×, p99 latency %.2f×", rep.IngestRatio, rep.P99Ratio)
		if len(rep.Rounds) > 0 {
			fmt.Fprintf(w, " over %d rounds", len(rep.Rounds))
		}
		fmt.Fprintln(w)
	}
	if len(rep.Rounds) > 0 {
		ratios := make([]float64, len(rep.Rounds))
		var parts []string
		for i, r := range rep.Rounds {
			ratios[i] = r.P99Ratio
			parts = append(parts, fmt.Sprintf("%.2f/%.2f ms %.2f×", r.MergegateP99, r.BareP99, r.P99Ratio))
		}
		sort.Float64s(ratios)
		median := (ratios[(len(ratios)-1)/2] + ratios[len(ratios)/2]) / 2
		fmt.Fprintf(w, "rounds, p99 mergegate/bare: %s; median %.2f×\n", strings.Join(parts, ", "), median)
	}
	if rep.Mergegate != nil && rep.Mergegate.BytesPerDeliv > 0 {
		fmt.Fprintf(w, "deliveries: %d bytes on average; late = waited for --max-inflight or started >1ms after schedule (max %.1f ms)\n",
			rep.Mergegate.BytesPerDeliv, rep.Mergegate.MaxLateMs)
	}
}
