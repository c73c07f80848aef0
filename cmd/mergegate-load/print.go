package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

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
