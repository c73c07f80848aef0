package app

import (
	"context"
	"fmt"
	"html/template"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// StatsView is what the dashboard's pictures show, from the audit the
// store keeps (the last leasedo.AuditCap rows of each repository): queue
// length and merges over the last 24 hours and 7 days, the time from
// joining to merged, bounces by reason, and the CI time of merge train
// groups that landed.
type StatsView struct {
	// Complete: the audit reaches back 7 days (else the pictures begin
	// where it does: Since).
	Complete  bool  `json:"complete"`
	Since     int64 `json:"since"` // epoch ms of the first row read
	Merged24h int   `json:"merged24h"`
	Merged7d  int   `json:"merged7d"`
	Bounced7d int   `json:"bounced7d"`
	// MergeP50MS and MergeP90MS are the time from joining to merged of the
	// merges of the last 7 days whose join is in the audit (0: none).
	MergeP50MS int64 `json:"mergeP50Ms"`
	MergeP90MS int64 `json:"mergeP90Ms"`
	Merges     int   `json:"mergesTimed"`
	// TrainCIP50MS is the median CI time of the train groups that landed
	// in the last 7 days (0: none).
	TrainCIP50MS int64           `json:"trainCiP50Ms,omitempty"`
	TrainGroups  int             `json:"trainGroups,omitempty"`
	Bounces      []ReasonCount   `json:"bounces"`
	QueueNow     int             `json:"queueNow"`
	SVG          []template.HTML `json:"-"`
	P50Text      string          `json:"-"`
	P90Text      string          `json:"-"`
	TrainCIText  string          `json:"-"`
	SinceText    string          `json:"-"`
}

// ReasonCount is how many bounces had one reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	N      int    `json:"n"`
}

// statsWindow is how far back the pictures reach.
const statsWindow = 7 * 24 * time.Hour

// loadStats reads the activity of keys and draws it.
func (d *dashboard) loadStats(ctx context.Context, keys []leasedo.Key, now time.Time) (*StatsView, error) {
	var acts []leasedo.Activity
	for _, k := range keys {
		a, err := d.cfg.Store.ActivitySince(ctx, k, now.Add(-statsWindow))
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
	}
	return computeStats(acts, now), nil
}

// trainCI finds the CI time a train landing's audit reason gives.
var trainCI = regexp.MustCompile(`train group ([0-9]+) after ([0-9hms.]+) of CI`)

// computeStats draws acts (each one repository's) as of now.
func computeStats(acts []leasedo.Activity, now time.Time) *StatsView {
	st := &StatsView{Complete: true, Bounces: []ReasonCount{}}
	nowMS := now.UnixMilli()
	dayAgo, weekAgo := now.Add(-24*time.Hour).UnixMilli(), now.Add(-statsWindow).UnixMilli()
	var hourly [24]int   // merges per hour, the last 24 h (index 23: the last hour)
	var daily [7]int     // merges per day, the last 7 days
	var qDay [25]float64 // queue length at each hour back (index 24: now)
	var qWeek [29]float64
	var toMerge, ci []time.Duration
	bounces := map[string]int{}
	landed := map[string]bool{} // train groups counted, by id
	st.Since = nowMS
	for _, a := range acts {
		st.Complete = st.Complete && a.Complete
		st.QueueNow += a.QueueLength
		if len(a.Audit) > 0 && a.Audit[0].TS < st.Since {
			st.Since = a.Audit[0].TS
		}
		joined := map[int]int64{}
		for _, e := range a.Audit {
			switch e.Action {
			case leasedo.AuditJoin:
				joined[e.PRNumber] = e.TS
			case leasedo.AuditMerge:
				if e.TS >= weekAgo {
					st.Merged7d++
					daily[min(int((nowMS-e.TS)/int64(24*time.Hour/time.Millisecond)), 6)]++
				}
				if e.TS >= dayAgo {
					st.Merged24h++
					hourly[23-min(int((nowMS-e.TS)/int64(time.Hour/time.Millisecond)), 23)]++
				}
				if at, ok := joined[e.PRNumber]; ok {
					toMerge = append(toMerge, time.Duration(e.TS-at)*time.Millisecond)
					delete(joined, e.PRNumber)
				}
				if m := trainCI.FindStringSubmatch(e.Reason); m != nil && !landed[m[1]] { // once per group
					if dur, err := time.ParseDuration(m[2]); err == nil {
						landed[m[1]] = true
						ci = append(ci, dur)
					}
				}
			case leasedo.AuditBounce:
				st.Bounced7d++
				bounces[bounceKind(e.Reason)]++
			}
		}
		// The queue's length back in time: now's, less the joins after,
		// plus the exits after.
		lengthAt := func(ts int64) float64 {
			n := a.QueueLength
			for _, e := range a.Audit {
				if e.TS <= ts {
					continue
				}
				switch e.Action {
				case leasedo.AuditJoin:
					n--
				case leasedo.AuditMerge, leasedo.AuditLeave, leasedo.AuditRemove:
					n++
				}
			}
			return float64(max(n, 0))
		}
		for i := range qDay {
			qDay[i] += lengthAt(nowMS - int64(24-i)*int64(time.Hour/time.Millisecond))
		}
		for i := range qWeek {
			qWeek[i] += lengthAt(nowMS - int64(28-i)*int64(6*time.Hour/time.Millisecond))
		}
	}
	for r, n := range bounces {
		st.Bounces = append(st.Bounces, ReasonCount{Reason: r, N: n})
	}
	sort.Slice(st.Bounces, func(i, j int) bool {
		if st.Bounces[i].N != st.Bounces[j].N {
			return st.Bounces[i].N > st.Bounces[j].N
		}
		return st.Bounces[i].Reason < st.Bounces[j].Reason
	})
	st.Merges = len(toMerge)
	if p50, p90, ok := percentiles(toMerge); ok {
		st.MergeP50MS, st.MergeP90MS = p50.Milliseconds(), p90.Milliseconds()
		st.P50Text, st.P90Text = since(p50), since(p90)
	}
	st.TrainGroups = len(ci)
	if p50, _, ok := percentiles(ci); ok {
		st.TrainCIP50MS, st.TrainCIText = p50.Milliseconds(), since(p50)
	}
	st.SinceText = timeText(msTime(st.Since))

	hourLabels := make([]string, 24)
	for i := range hourLabels {
		if i%6 == 0 {
			hourLabels[i] = fmt.Sprintf("-%dh", 24-i)
		}
	}
	hourLabels[23] = "now"
	var dayVals []int
	var dayLabels []string
	for i := 6; i >= 0; i-- {
		dayVals = append(dayVals, daily[i])
		dayLabels = append(dayLabels, now.Add(-time.Duration(i)*24*time.Hour).Format("Mon"))
	}
	st.SVG = []template.HTML{
		lineSVG("Queue length, last 24 h", qDay[:], "-24h", "now"),
		lineSVG("Queue length, last 7 days", qWeek[:], "-7d", "now"),
		barsSVG(fmt.Sprintf("Merges per hour, last 24 h (%d)", st.Merged24h), hourly[:], hourLabels),
		barsSVG(fmt.Sprintf("Merges per day, last 7 days (%d)", st.Merged7d), dayVals, dayLabels),
		histSVG(toMerge, st.P50Text, st.P90Text),
		hbarsSVG(fmt.Sprintf("Bounces by reason, last 7 days (%d)", st.Bounced7d), st.Bounces),
	}
	if len(ci) > 0 {
		st.SVG = append(st.SVG, ciSVG(ci, st.TrainCIText))
	}
	return st
}

// bounceKind is a bounce's reason without what differs from one pull
// request to the next (quoted names stay: they say which check).
var shaText = regexp.MustCompile(`\b[0-9a-f]{7,40}\b`)

func bounceKind(reason string) string {
	r := shaText.ReplaceAllString(reason, "…")
	if r == "" {
		return "(no reason given)"
	}
	return r
}

func percentiles(ds []time.Duration) (p50, p90 time.Duration, ok bool) {
	if len(ds) == 0 {
		return 0, 0, false
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		return s[min(int(math.Ceil(p*float64(len(s))))-1, len(s)-1)]
	}
	return at(0.5), at(0.9), true
}

// The pictures: SVG drawn here, inline in the page (no script, no CDN;
// the colours are the page's, light or dark). Each is 480×160 units,
// scaled to its box's width.
const (
	svgW, svgH     = 360, 150
	padL, padR     = 28, 6
	padT, padB     = 24, 20
	plotW          = svgW - padL - padR
	plotH          = svgH - padT - padB
	axisY          = padT + plotH
	labelY         = svgH - 4
	maxReasonChars = 56
)

func esc(s string) string { return template.HTMLEscapeString(s) }

func svgStart(title string) *strings.Builder {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title><text class="t" x="0" y="14">%s</text>`,
		svgW, svgH, esc(title), esc(title), esc(title))
	return &b
}

// axis draws the base line and the scale's top and 0.
func axis(b *strings.Builder, top float64) {
	fmt.Fprintf(b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/><text class="l" x="%d" y="%d" text-anchor="end">%s</text><text class="l" x="%d" y="%d" text-anchor="end">0</text>`,
		padL, axisY, svgW-padR, axisY, padL-4, padT+4, numText(top), padL-4, axisY+3)
}

const svgClose = `</svg>`

func niceMax(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func numText(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func lineSVG(title string, vals []float64, from, to string) template.HTML {
	b := svgStart(title)
	top := niceMax(slices.Max(vals))
	axis(b, top)
	var pts []string
	for i, v := range vals {
		x := padL + float64(plotW)*float64(i)/float64(len(vals)-1)
		y := padT + float64(plotH)*(1-v/top)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	fmt.Fprintf(b, `<polygon class="area" points="%d,%d %s %d,%d"/>`, padL, axisY, strings.Join(pts, " "), svgW-padR, axisY)
	fmt.Fprintf(b, `<polyline class="line" points="%s"/>`, strings.Join(pts, " "))
	fmt.Fprintf(b, `<text class="l" x="%d" y="%d">%s</text><text class="l" x="%d" y="%d" text-anchor="end">%s</text>`, padL, labelY, esc(from), svgW-padR, labelY, esc(to))
	fmt.Fprintf(b, `<text class="l" x="%d" y="14" text-anchor="end">now %s</text>`, svgW-padR, numText(vals[len(vals)-1]))
	b.WriteString(svgClose)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped
}

func barsSVG(title string, vals []int, labels []string) template.HTML {
	b := svgStart(title)
	top := niceMax(float64(slices.Max(vals)))
	axis(b, top)
	slot := float64(plotW) / float64(len(vals))
	for i, v := range vals {
		x := padL + slot*float64(i)
		h := float64(plotH) * float64(v) / top
		if v > 0 {
			fmt.Fprintf(b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%d</title></rect>`, x+slot*0.15, float64(axisY)-h, slot*0.7, h, v)
		}
		if labels[i] != "" {
			fmt.Fprintf(b, `<text class="l" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+slot/2, labelY, esc(labels[i]))
		}
	}
	b.WriteString(svgClose)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped
}

// histSVG is the distribution of the time from joining to merged.
func histSVG(ds []time.Duration, p50, p90 string) template.HTML {
	edges := []time.Duration{5 * time.Minute, 15 * time.Minute, time.Hour, 4 * time.Hour, 24 * time.Hour}
	labels := []string{"<5m", "5–15m", "15m–1h", "1–4h", "4–24h", ">1d"}
	counts := make([]int, len(labels))
	for _, d := range ds {
		i := sort.Search(len(edges), func(i int) bool { return d < edges[i] })
		counts[i]++
	}
	title := "Time from joining to merged, last 7 days"
	if p50 != "" {
		title += " (p50 " + p50 + ", p90 " + p90 + ")"
	} else {
		title += " (no merge yet)"
	}
	return barsSVG(title, counts, labels)
}

// ciSVG is the distribution of the CI time of train groups that landed.
func ciSVG(ds []time.Duration, p50 string) template.HTML {
	edges := []time.Duration{2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 20 * time.Minute, time.Hour}
	labels := []string{"<2m", "2–5m", "5–10m", "10–20m", "20m–1h", ">1h"}
	counts := make([]int, len(labels))
	for _, d := range ds {
		counts[sort.Search(len(edges), func(i int) bool { return d < edges[i] })]++
	}
	return barsSVG(fmt.Sprintf("CI time of merge train groups that landed (%d, p50 %s)", len(ds), p50), counts, labels)
}

// hbarsSVG is one horizontal bar per reason, the most frequent first.
func hbarsSVG(title string, rs []ReasonCount) template.HTML {
	rows := rs
	if len(rows) > 5 {
		rows = slices.Clone(rs[:5])
		n := 0
		for _, r := range rs[5:] {
			n += r.N
		}
		rows = append(rows, ReasonCount{Reason: "other reasons", N: n})
	}
	b := svgStart(title)
	if len(rows) == 0 {
		b.WriteString(`<text class="l" x="0" y="44">No bounce.</text>`)
	}
	top := 1
	for _, r := range rows {
		top = max(top, r.N)
	}
	for i, r := range rows {
		y := 20 + i*21
		w := float64(svgW-30) * float64(r.N) / float64(top)
		reason := r.Reason
		if len([]rune(reason)) > maxReasonChars {
			reason = string([]rune(reason)[:maxReasonChars-1]) + "…"
		}
		fmt.Fprintf(b, `<text class="l" x="0" y="%d">%s</text>`, y+8, esc(reason))
		fmt.Fprintf(b, `<rect class="bar bad" x="0" y="%d" width="%.1f" height="7"><title>%s</title></rect><text class="l" x="%.1f" y="%d">%d</text>`,
			y+11, max(w, 1), esc(r.Reason), max(w, 1)+4, y+18, r.N)
	}
	b.WriteString(svgClose)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped
}
