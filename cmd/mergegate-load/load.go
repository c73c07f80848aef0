package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mergegate/mergegate/internal/loadgen"
)

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
