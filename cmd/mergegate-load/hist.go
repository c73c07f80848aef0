package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

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
