package forge

import (
	"bytes"
	"container/list"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// fakeEnv is a Client against the fake GitHub, with the cache's bounds set.
type fakeEnv struct {
	gh  *fakegithub.Server
	c   *Client
	ctx context.Context
}

func newFakeEnv(tb testing.TB, entries int, bytes int64) *fakeEnv {
	tb.Helper()
	gh := fakegithub.New(tb)
	c, err := New(Config{BaseURL: gh.URL(), AppID: gh.AppID(), PrivateKey: gh.PrivateKeyPEM(), CacheEntries: entries, CacheBytes: bytes})
	if err != nil {
		tb.Fatal(err)
	}
	return &fakeEnv{gh: gh, c: c, ctx: context.Background()}
}

// fakePR is PR n as the scale test makes them: even ones labelled.
func fakePR(n int, body []byte) fakegithub.PR {
	labels := []string{"bug"}
	if n%2 == 0 {
		labels = []string{"automerge"}
	}
	return fakegithub.PR{Number: n, Labels: labels, Body: string(body)}
}

func sized(key string, size int64) *cacheEntry { return &cacheEntry{key: key, size: size} }

// order returns the keys from the most recently used to the least, cold
// ones marked "~", after checking the cache's invariants.
func order(t *testing.T, c *etagCache) []string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	var sum, coldSum int64
	colds := 0
	inCold := false
	for el := c.ll.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry)
		if el == c.coldHead {
			inCold = true
		}
		if e.cold != inCold {
			t.Fatalf("entry %s: cold=%v, but coldHead says %v", e.key, e.cold, inCold)
		}
		if c.entries[e.key] != el {
			t.Fatalf("entry %s: map and list disagree", e.key)
		}
		sum += e.size
		k := e.key
		if e.cold {
			k = "~" + k
			colds++
			coldSum += e.size
		}
		keys = append(keys, k)
	}
	if c.coldHead != nil && !inCold {
		t.Fatal("coldHead is not in the list")
	}
	if len(c.entries) != len(keys) || sum != c.bytes || colds != c.coldEntries || coldSum != c.coldBytes {
		t.Fatalf("%d map entries, %d listed; bytes %d counted, %d summed; cold: %d/%d entries, %d/%d bytes",
			len(c.entries), len(keys), c.bytes, sum, c.coldEntries, colds, c.coldBytes, coldSum)
	}
	if colds > max(1, c.maxEntries/maxColdShare) || coldSum > c.maxBytes/maxColdShare {
		t.Fatalf("%d cold entries, %d bytes: over their share", colds, coldSum)
	}
	if len(keys) > c.maxEntries || c.bytes > c.maxBytes {
		t.Fatalf("%d entries, %d bytes: over the bounds %d, %d", len(keys), c.bytes, c.maxEntries, c.maxBytes)
	}
	return keys
}

func TestCacheLRUBothBounds(t *testing.T) {
	t.Run("entries", func(t *testing.T) {
		c := newETagCache(4, 1<<20)
		for _, k := range []string{"a", "b", "c", "d"} {
			c.put(sized(k, 100), false)
		}
		c.get("a")
		c.put(sized("e", 100), false)
		if got := order(t, c); !slices.Equal(got, []string{"e", "a", "d", "c"}) {
			t.Errorf("order = %v, want b (least recently used) evicted", got)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		c := newETagCache(100, 1000) // an entry may take 1000/16 = 62 bytes
		for i := 0; i < 16; i++ {
			c.put(sized(fmt.Sprint(i), 60), false) // 960 bytes
		}
		c.get("0")
		c.put(sized("16", 60), false)
		got := order(t, c)
		if len(got) != 16 || got[0] != "16" || got[1] != "0" || slices.Contains(got, "1") {
			t.Errorf("order = %v, want 1 (least recently used) evicted", got)
		}
		// A bigger answer for a cached URL is counted at its new size.
		c.put(sized("5", 62), false) // 962 bytes
		c.put(sized("17", 50), false)
		got = order(t, c)
		if got[0] != "17" || got[1] != "5" || slices.Contains(got, "2") || got[len(got)-1] != "3" {
			t.Errorf("order = %v, want 2 evicted to make room", got)
		}
		if _, b := c.size(); b != 960+2+50-60 {
			t.Errorf("bytes = %d", b)
		}
	})
	t.Run("both", func(t *testing.T) {
		// Whichever bound is over evicts, from the same end.
		c := newETagCache(20, 1600)
		for i := 0; i <= 20; i++ {
			c.put(sized("s"+strconv.Itoa(i), 10), false) // s0 out by the entry bound
		}
		c.get("s1")
		for i := 0; i <= 14; i++ {
			c.put(sized("B"+strconv.Itoa(i), 100), false) // each evicts a small one by the entry bound
		}
		want := []string{"B14", "B13", "B12", "B11", "B10", "B9", "B8", "B7", "B6", "B5", "B4", "B3", "B2", "B1", "B0", "s1", "s20", "s19", "s18", "s17"}
		if got := order(t, c); !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
		c.put(sized("B15", 100), false) // 1640 bytes: the byte bound evicts 4 more
		want = append([]string{"B15"}, want[:15]...)
		if got := order(t, c); !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
		if n, b := c.size(); n != 16 || b != 1600 {
			t.Fatalf("size = %d entries, %d bytes", n, b)
		}
		c.get("B0")
		c.put(sized("s21", 10), false)
		if got := order(t, c); len(got) != 16 || got[0] != "s21" || got[1] != "B0" || slices.Contains(got, "B1") {
			t.Errorf("order = %v, want B1 (least recently used) evicted", got)
		}
	})
	t.Run("too big", func(t *testing.T) {
		c := newETagCache(100, 1600) // at most 100 bytes an entry
		c.put(sized("a", 100), false)
		c.put(sized("b", 100), false)
		if c.put(sized("a", 101), false) {
			t.Error("an entry over a 16th of the bound was kept")
		}
		if got := order(t, c); !slices.Equal(got, []string{"b"}) {
			t.Errorf("order = %v, want the older answer for a dropped too", got)
		}
	})
}

// Probation: cold entries never evict regular ones, are evicted first,
// oldest first among themselves, hold at most 1/8 of each bound, and become
// regular when asked for again.
func TestCacheColdTail(t *testing.T) {
	c := newETagCache(16, 1<<20) // at most 2 cold entries
	var want []string
	for i := 1; i <= 14; i++ {
		c.put(sized("h"+strconv.Itoa(i), 100), false)
		want = append([]string{"h" + strconv.Itoa(i)}, want...)
	}
	for i := 1; i <= 50; i++ {
		c.put(sized("c"+strconv.Itoa(i), 100), true)
	}
	if got := order(t, c); !slices.Equal(got, append(want, "~c50", "~c49")) {
		t.Fatalf("after a scan: %v, want the regular entries and the 2 newest cold ones", got)
	}
	if c.get("c49") == nil {
		t.Fatal("c49 not cached")
	}
	want = append([]string{"c49"}, want...)
	if got := order(t, c); !slices.Equal(got, append(want, "~c50")) {
		t.Fatalf("after asking for c49 again: %v, want it promoted", got)
	}
	c.put(sized("h15", 100), false)
	want = append([]string{"h15"}, want...)
	if got := order(t, c); !slices.Equal(got, want) {
		t.Fatalf("%v, want the cold entry evicted first", got)
	}
	if c.put(sized("c51", 100), true) {
		t.Error("a cold entry evicted a regular one")
	}
	c.put(sized("h16", 100), false)
	want = append([]string{"h16"}, want[:len(want)-1]...) // h1 out
	if got := order(t, c); !slices.Equal(got, want) {
		t.Fatalf("%v, want the least recently used regular entry (h1) evicted", got)
	}
	// A cold answer for a cached URL: the URL was asked for again.
	c.put(sized("h2", 100), true)
	if got := order(t, c); got[0] != "h2" || len(got) != 16 {
		t.Fatalf("%v, want h2 kept as a regular entry", got)
	}

	// The same by bytes.
	c = newETagCache(100, 1600) // at most 200 cold bytes
	for i := 0; i < 10; i++ {
		c.put(sized("h"+strconv.Itoa(i), 100), false)
	}
	for i := 0; i < 100; i++ {
		c.put(sized("c"+strconv.Itoa(i), 100), true)
	}
	got := order(t, c)
	if len(got) != 12 || got[9] != "h0" || got[10] != "~c99" || got[11] != "~c98" {
		t.Fatalf("by bytes: %v", got)
	}
	for _, k := range []string{"h10", "h11", "h12", "h13"} {
		c.put(sized(k, 100), false) // 1600 bytes
	}
	c.get("c99")
	c.put(sized("h14", 100), false) // evicts c98
	got = order(t, c)
	if len(got) != 16 || !slices.Equal(got[:2], []string{"h14", "c99"}) || got[15] != "h0" {
		t.Fatalf("by bytes: %v", got)
	}
	c.remove("c99")
	c.remove("h14")
	c.put(sized("c100", 100), true)
	c.put(sized("c101", 100), true)
	if got := order(t, c); !slices.Equal(got[14:], []string{"~c101", "~c100"}) {
		t.Fatalf("by bytes: %v", got)
	}
	c.put(sized("c102", 100), true)
	if got := order(t, c); len(got) != 16 || !slices.Equal(got[14:], []string{"~c102", "~c101"}) {
		t.Fatalf("by bytes: %v, want c100 (the oldest cold entry) out", got)
	}
}

// A 304 hands go-github the exact body of the cached 200 and the headers
// it reads (media type, pagination links, validators), with the 304's
// fresh rate-limit headers; the body is kept compressed, the other headers
// (request ids, Vary: the 304 carries its own) are not kept.
func TestCacheRoundTripExact(t *testing.T) {
	body := githubListing(t, 20)
	var remaining, sent atomic.Int64
	remaining.Store(5000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		h := w.Header()
		h.Set("X-RateLimit-Remaining", strconv.FormatInt(remaining.Add(-1), 10))
		h.Set("ETag", `W/"abc"`)
		if r.Header.Get("If-None-Match") == `W/"abc"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Last-Modified", "Mon, 03 Mar 2025 10:00:00 GMT")
		h.Set("Link", `<https://api.github.com/repositories/1/pulls?page=2>; rel="next", <https://api.github.com/repositories/1/pulls?page=3>; rel="last"`)
		h.Add("Vary", "Accept, Authorization, Cookie")
		h.Add("Vary", "Accept-Encoding")
		h.Set("X-GitHub-Request-Id", "C0DE:1:2:3")
		w.Write(body)
	}))
	defer srv.Close()
	c := newETagCache(0, 0)
	hc := &http.Client{Transport: &cacheTransport{inst: "1", cache: c, next: http.DefaultTransport}}
	get := func() (*http.Response, []byte) {
		t.Helper()
		resp, err := hc.Get(srv.URL + "/repos/o/r/pulls?page=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	first, b1 := get()
	second, b2 := get()
	if second.StatusCode != 200 || second.Header.Get("X-Mergegate-Cache") != "revalidated" {
		t.Fatalf("second answer: %d %v, want a revalidated 200", second.StatusCode, second.Header)
	}
	if !bytes.Equal(b1, body) || !bytes.Equal(b2, body) {
		t.Fatalf("bodies differ: %d and %d bytes, want %d", len(b1), len(b2), len(body))
	}
	for _, k := range []string{"Content-Type", "Last-Modified", "Link", "Etag"} {
		if v := first.Header[k]; len(v) == 0 || !slices.Equal(second.Header[k], v) {
			t.Errorf("header %s = %q, want %q", k, second.Header[k], v)
		}
	}
	if v := second.Header.Get("X-Github-Request-Id"); v != "" {
		t.Errorf("X-GitHub-Request-Id = %q kept from the 200; want the 304's (none here)", v)
	}
	if got := second.Header.Get("X-Ratelimit-Remaining"); got != "4998" {
		t.Errorf("X-RateLimit-Remaining = %q, want the 304's 4998", got)
	}
	if second.ContentLength != int64(len(body)) {
		t.Errorf("ContentLength = %d", second.ContentLength)
	}
	n, size := c.size()
	e := c.get("1 " + srv.URL + "/repos/o/r/pulls?page=1 ")
	if n != 1 || e == nil {
		t.Fatalf("cache holds %d entries", n)
	}
	if len(e.body) > len(body)/5 || size < int64(cap(e.body)) || size > int64(cap(e.body))+2048 {
		t.Errorf("cached body: %d bytes (cap %d) for %d raw, counted %d", len(e.body), cap(e.body), len(body), size)
	}
	t.Logf("20-PR listing: %d bytes raw, %d compressed (%.1f×), counted %d", len(body), len(e.body), float64(len(body))/float64(len(e.body)), size)

	// An entry that does not decode (it cannot happen) is dropped and the
	// request sent again, unconditionally.
	e.body = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	before := sent.Load()
	third, b3 := get()
	if third.StatusCode != 200 || !bytes.Equal(b3, body) || third.Header.Get("X-Mergegate-Cache") != "" || sent.Load()-before != 2 {
		t.Errorf("after a corrupt entry: %d, %d bytes, %d requests", third.StatusCode, len(b3), sent.Load()-before)
	}
	if _, b4 := get(); !bytes.Equal(b4, body) {
		t.Error("not cached again")
	}
}

// The cron's two passes at the scale test's shape (reconcile's
// TestRunAllAtScale: 10 installations, 20 open PRs a repository, half
// labelled; 1,000 repositories with MERGEGATE_LONG_TESTS=1, else 50), with
// the default bounds: a rebuild (every listing, every labelled PR's issue
// events), then an unchanged pass, whose every listing must be a 304. Logs
// what the cache holds: counted, uncompressed, and the heap it adds.
func TestCacheAtScale(t *testing.T) {
	perTenant := 5
	if os.Getenv("MERGEGATE_LONG_TESTS") == "1" {
		perTenant = 100
	}
	e := newFakeEnv(t, 0, 0)
	type rk struct{ tenant, repo string }
	var all []rk
	for ti := 0; ti < 10; ti++ {
		tn := strconv.Itoa(500 + ti)
		for i := 0; i < perTenant; i++ {
			r := rk{tn, fmt.Sprintf("org%s/repo-%03d", tn, i)}
			e.gh.AddRepo(r.tenant, r.repo, "main")
			for n := 1; n <= 20; n++ {
				e.gh.AddPR(r.repo, fakePR(n, nil))
			}
			all = append(all, r)
		}
	}
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	// Each installation's token first, so that the heap before counts it.
	for ti := 0; ti < 10; ti++ {
		if _, err := e.c.ListOpenPRs(e.ctx, all[ti*perTenant].tenant, all[ti*perTenant].repo); err != nil {
			t.Fatal(err)
		}
	}
	cache := e.c.cache
	cache.mu.Lock()
	cache.ll.Init()
	cache.entries, cache.coldHead, cache.bytes = map[string]*list.Element{}, nil, 0
	cache.mu.Unlock()
	h0 := heap()
	// Pass 1, 8 repositories at once as RunAll does.
	work := make(chan rk)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Go(func() {
			for r := range work {
				if _, err := e.c.ListOpenPRs(e.ctx, r.tenant, r.repo); err != nil {
					t.Error(err)
				}
				for n := 2; n <= 20; n += 2 {
					if _, err := e.c.TriggerTimes(e.ctx, r.tenant, r.repo, n, "automerge"); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	for _, r := range all {
		work <- r
	}
	close(work)
	wg.Wait()
	e.gh.ResetCalls()
	h1 := heap()
	entries, counted := e.c.CacheSize()
	var raw, compressed int64
	e.c.cache.mu.Lock()
	for _, el := range e.c.cache.entries {
		ce := el.Value.(*cacheEntry)
		n, _ := s2.DecodedLen(ce.body)
		raw += int64(n)
		compressed += int64(len(ce.body))
	}
	e.c.cache.mu.Unlock()
	// Pass 2: unchanged.
	before := e.c.EndpointStats()["pulls.list"]
	for _, r := range all {
		if _, err := e.c.ListOpenPRs(e.ctx, r.tenant, r.repo); err != nil {
			t.Fatal(err)
		}
	}
	after := e.c.EndpointStats()["pulls.list"]
	nm := after.NotModified - before.NotModified
	t.Logf("%d repositories: after the rebuild the cache holds %d entries, %d bytes counted (bound %d): bodies %d bytes compressed, %d uncompressed; heap +%d bytes; unchanged pass: %d of %d listings 304",
		len(all), entries, counted, defaultCacheBytes, compressed, raw, int64(h1)-int64(h0), nm, after.Requests-before.Requests)
	if nm != int64(len(all)) {
		t.Errorf("unchanged pass: %d listings of %d were 304", nm, len(all))
	}
	if counted > defaultCacheBytes {
		t.Errorf("cache counts %d bytes, over %d", counted, defaultCacheBytes)
	}
}
