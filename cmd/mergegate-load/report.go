package main

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
