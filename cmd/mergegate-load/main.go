package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mergegate/mergegate/internal/loadgen"
)

const usage = `mergegate-load — load a running mergegate (loopback only) and compare it with a bare handler

Usage:
  mergegate serve --webhook-secret S --db /tmp/load.db &      # no App credentials: gates wait
  mergegate-load --webhook-secret S --rate 1000/s --repos 100 --duration 30s

  (from a checkout: go run ./cmd/mergegate-load ..., or make load for ./bin/mergegate-load)

  Replicas on one PostgreSQL database: every listener, comma-separated,
  delivery i to the (i mod n)-th; processing adds up every admin listener's:
  mergegate-load --webhook-secret S --url http://127.0.0.1:8080/webhook,http://127.0.0.1:9080/webhook \
    --admin-url http://127.0.0.1:8081,http://127.0.0.1:9081 --bare=false

Open loop: with --rate, request i starts at start+i/rate whether or not the
earlier ones were answered (at most --max-inflight at once; a start that had
to wait for that cap, or that began more than 1 ms after its time, is counted
late). --rate max sends as fast as --concurrency clients can. Processing is
read from the admin listener's GET /deliveries/stats (the deliveries applied
to queues; far cheaper than a /metrics scrape, which would weigh on what is
measured). On a noisy machine, --rounds 6 --duration 5s alternates the bare
handler and mergegate so that both meet the same spells.

The deliveries are built from testdata/github-webhooks, found from the
working directory or the binary's upwards (or --payloads).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: exit 0 done, 1 failed, 2 a bad command line.
func run(args []string, stdout, stderr io.Writer) int {
	err := load(args, stdout, stderr)
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "mergegate-load: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "mergegate-load: %v\n", err)
		return 1
	}
}

// usageError is a bad command line (exit 2).
type usageError struct{ error }

type config struct {
	url, adminURL, secret, adminToken string
	urls, adminURLs                   []string // url and adminURL split at commas
	rate                              float64  // 0: as fast as possible
	concurrency, maxInflight          int
	repos, prs                        int
	tenant                            int64
	duration, drain, poll             time.Duration
	count, rounds                     int
	payloads                          string
	bare, target, asJSON              bool
}

// Hard bounds: the tool always stops by itself.
const (
	maxDuration = 2 * time.Hour
	maxCount    = 20_000_000
)

func load(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mergegate-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage, "\nFlags:\n")
		fs.PrintDefaults()
	}
	var f config
	var rate string
	fs.StringVar(&f.url, "url", envOr("MERGEGATE_LOAD_URL", "http://127.0.0.1:8080/webhook"), "mergegate's POST /webhook (loopback only); several, comma-separated (replicas on one database): delivery i goes to the (i mod n)-th (env MERGEGATE_LOAD_URL)")
	fs.StringVar(&f.adminURL, "admin-url", envOr("MERGEGATE_LOAD_ADMIN_URL", "http://127.0.0.1:8081"), "mergegate's admin listener, for GET /deliveries/stats; several, comma-separated: every replica's, whose applied counts and RSS are added up; empty: do not measure processing (env MERGEGATE_LOAD_ADMIN_URL)")
	fs.StringVar(&f.secret, "webhook-secret", os.Getenv("GITHUB_WEBHOOK_SECRET"), "secret to sign with (the first of a comma-separated list) (env GITHUB_WEBHOOK_SECRET)")
	fs.StringVar(&f.adminToken, "admin-token", os.Getenv("MERGEGATE_ADMIN_TOKEN"), "bearer token for the admin listener (env MERGEGATE_ADMIN_TOKEN)")
	fs.StringVar(&rate, "rate", "1000/s", "deliveries per second, open loop (e.g. 1000 or 1000/s), or max: as fast as --concurrency clients can")
	fs.IntVar(&f.concurrency, "concurrency", 32, "clients with --rate max")
	fs.IntVar(&f.maxInflight, "max-inflight", 512, "requests in flight at most (open loop)")
	fs.IntVar(&f.repos, "repos", 100, "repositories the deliveries are spread over")
	fs.IntVar(&f.prs, "prs", 20, "open pull requests per repository (the queues stay this long)")
	fs.Int64Var(&f.tenant, "tenant", 1, "installation id of the deliveries")
	fs.DurationVar(&f.duration, "duration", 10*time.Second, "how long to send, per target (at most 2h)")
	fs.IntVar(&f.count, "count", 0, "deliveries per target; 0: as many as --duration allows (at most 20,000,000)")
	fs.DurationVar(&f.drain, "drain", time.Minute, "after sending, how long to wait for processing to catch up")
	fs.DurationVar(&f.poll, "poll", time.Second, "how often GET /deliveries/stats is read while sending")
	fs.StringVar(&f.payloads, "payloads", "", "folder of GitHub's payload examples (default: testdata/github-webhooks found from here or the binary upwards)")
	fs.BoolVar(&f.bare, "bare", true, "also run the same load against an in-process bare handler (HMAC check, 202) and report the ratio")
	fs.BoolVar(&f.target, "target", true, "run against mergegate (false: the bare handler only)")
	fs.IntVar(&f.rounds, "rounds", 1, "alternate the targets this many times, each for --duration (or --count): both meet the same spells of a noisy machine; figures are over all rounds, with each round's p99 ratio")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := f.check(rate); err != nil {
		return usageError{err}
	}
	gen, err := loadgen.New(f.payloads, f.repos, f.prs, f.tenant)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rep := report{Rate: f.rate, Repos: f.repos, PRs: f.prs, Duration: f.duration.String(), Count: f.count,
		Concurrency: f.concurrency, MaxInflight: f.maxInflight}
	var m *statsPoller
	if f.target && len(f.adminURLs) > 0 {
		m = &statsPoller{token: f.adminToken, client: &http.Client{Timeout: 30 * time.Second}}
		for _, u := range f.adminURLs {
			m.bases = append(m.bases, strings.TrimRight(u, "/"))
		}
	}
	// Each target's latencies over every round, besides each round's own.
	var bareAll, targetAll latHist
	for round := 0; round < f.rounds && ctx.Err() == nil; round++ {
		var pair roundReport
		if f.bare {
			r, err := loadBare(ctx, f, gen, &bareAll)
			if err != nil {
				return err
			}
			rep.Bare = mergeTarget(rep.Bare, r, &bareAll)
			pair.BareP99 = r.Latency.P99
			printTarget(stderr, "bare", r)
		}
		if f.target && ctx.Err() == nil {
			r, err := runLoad(ctx, f, gen, f.urls, m, &targetAll)
			if err != nil {
				return err
			}
			rep.Mergegate = mergeTarget(rep.Mergegate, r, &targetAll)
			pair.MergegateP99 = r.Latency.P99
			printTarget(stderr, "mergegate", r)
		}
		if f.rounds > 1 && pair.BareP99 > 0 && pair.MergegateP99 > 0 {
			pair.P99Ratio = pair.MergegateP99 / pair.BareP99
			rep.Rounds = append(rep.Rounds, pair)
		}
	}
	if rep.Bare != nil && rep.Mergegate != nil {
		if rep.Bare.AckedPerSec > 0 {
			rep.IngestRatio = rep.Mergegate.AckedPerSec / rep.Bare.AckedPerSec
		}
		if rep.Bare.Latency.P99 > 0 {
			rep.P99Ratio = rep.Mergegate.Latency.P99 / rep.Bare.Latency.P99
		}
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	rep.print(stdout)
	return nil
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

func (f *config) check(rate string) error {
	r := strings.TrimSuffix(strings.TrimSpace(rate), "/s")
	if r == "max" || r == "0" {
		f.rate = 0
	} else {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v <= 0 || math.IsInf(v, 0) || v > 1e6 {
			return fmt.Errorf("--rate %q: want deliveries per second (e.g. 1000/s) or max", rate)
		}
		f.rate = v
	}
	if f.secret == "" {
		return errors.New("--webhook-secret (or GITHUB_WEBHOOK_SECRET) is required: deliveries must be signed")
	}
	f.secret, _, _ = strings.Cut(f.secret, ",")
	switch {
	case f.repos < 1 || f.repos > 1_000_000:
		return fmt.Errorf("--repos %d: want 1 to 1,000,000", f.repos)
	case f.prs < 1 || f.prs > 10_000:
		return fmt.Errorf("--prs %d: want 1 to 10,000", f.prs)
	case f.concurrency < 1 || f.concurrency > 4096:
		return fmt.Errorf("--concurrency %d: want 1 to 4096", f.concurrency)
	case f.maxInflight < 1 || f.maxInflight > 65536:
		return fmt.Errorf("--max-inflight %d: want 1 to 65536", f.maxInflight)
	case f.duration <= 0 || f.duration > maxDuration:
		return fmt.Errorf("--duration %s: want more than 0 and at most %s", f.duration, maxDuration)
	case f.rounds < 1 || f.rounds > 1000:
		return fmt.Errorf("--rounds %d: want 1 to 1000", f.rounds)
	case f.count < 0 || f.count > maxCount:
		return fmt.Errorf("--count %d: want 0 to %d", f.count, maxCount)
	case f.drain < 0 || f.drain > time.Hour:
		return fmt.Errorf("--drain %s: want 0 to 1h", f.drain)
	case f.poll < 10*time.Millisecond:
		return fmt.Errorf("--poll %s: want at least 10ms", f.poll)
	case !f.bare && !f.target:
		return errors.New("--bare=false and --target=false: nothing to run")
	}
	f.urls, f.adminURLs = splitList(f.url), splitList(f.adminURL)
	if f.target {
		if len(f.urls) == 0 {
			return errors.New("--url: want mergegate's POST /webhook, e.g. http://127.0.0.1:8080/webhook")
		}
		for _, u := range f.urls {
			if err := checkLoopbackURL(u); err != nil {
				return fmt.Errorf("--url: %w", err)
			}
		}
		for _, u := range f.adminURLs {
			if err := checkLoopbackURL(u); err != nil {
				return fmt.Errorf("--admin-url: %w", err)
			}
		}
	}
	return nil
}

// splitList is a comma-separated list without its empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkLoopbackURL refuses anything but http to a loopback address: the
// tool is for a mergegate on this machine, never a shared one.
func checkLoopbackURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return fmt.Errorf("%q: want http://127.0.0.1:PORT/...", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%q is not a loopback address: mergegate-load only loads a mergegate on this machine", raw)
}
