package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/mergegate/mergegate/app"
)

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
