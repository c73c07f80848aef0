package forge

import (
	"bytes"
	"container/list"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
)

// Conditional requests. GitHub does not count a 304 Not Modified answer
// against the rate limit, so every GET goes out with If-None-Match (and
// If-Modified-Since) when an earlier answer for the same URL is cached, and a
// 304 is handed to go-github as the cached 200. The cache never answers
// without asking GitHub, so it cannot serve stale data.
//
// Memory. The cache is bounded by entries and by bytes, and evicts the least
// recently used entries until it is under both. Bodies are kept S2-compressed
// (PR listings shrink ~19× with s2.Encode; see BenchmarkCacheS2) and the
// compressed size, plus the headers and a per-entry overhead, is what counts
// against the byte bound. A 200 is compressed once (~0.1 ms for a 420 KB,
// 20-PR listing), a 304 decodes it again (~0.1 ms, and allocates the body
// that go-github then reads): far below the request's own latency.
//
// Scans. Some answers are read once and never again in steady state: a PR's
// issue events are read (reconcile's joinMissing, TriggerTimes) only while it
// is eligible but not queued, i.e. when a queue is rebuilt or a webhook was
// missed; once it joins they are not read again. A rebuild reads one such
// listing per labelled PR (10,000 at the 1,000-repository scale), which, in
// a plain LRU, would evict the PR listings every pass needs. Such answers
// (coldOps) enter on probation, at the LRU's cold end: evicted before any
// other entry, never at the expense of a regular one, and all of them
// together held to 1/maxColdShare of each bound (oldest out first), so that
// a rebuild's read-once answers do not sit in the cache's memory either. An
// entry asked for again (e.g. the events of a PR bounced at its head whose
// auto-merge is still enabled: read on every pass until a new commit) is
// promoted to a regular entry and then answers 304 like any other.

const (
	// defaultCacheEntries holds the gate reads of every queued entry too
	// (its check runs, statuses and suites: three each), so that a cron
	// pass over 10,000 unchanged entries is all 304s; the byte bound
	// stays what limits the heap.
	defaultCacheEntries = 50000
	// defaultCacheBytes bounds the cache's heap. The target is a one-VM
	// install whose RSS stays under 100 MB, most of which the webhook path
	// takes under sustained load (docs/performance.md), and with the GC's
	// default GOGC=100 the heap may grow to twice what is live: the cache
	// can only have a fraction of it. 32 MiB holds the
	// steady-state working set of the tested scale (1,000 repositories:
	// one listing page each, plus gate reads and the probationary share;
	// TestCacheAtScale checks it). A 20-PR listing shaped like GitHub's
	// (BenchmarkCacheS2) is some 25 KB counted, compressed and with its
	// headers: 1,000 fit. Were real listings to compress worse, the least
	// recently used go first. Config.CacheBytes sets
	// another bound.
	defaultCacheBytes = 32 << 20
	// maxCachedBody bounds the body read into memory to be cached (raw,
	// before compression); larger bodies are handed through and not cached.
	maxCachedBody = 1 << 20
	// maxEntryShare: an entry that would take more than 1/maxEntryShare of
	// the byte bound is not cached (it would evict too much for one URL).
	maxEntryShare = 16
	// maxColdShare: probationary entries take at most 1/maxColdShare of
	// each bound (and at least one entry).
	maxColdShare = 8
	// entryOverhead, headerKeyOverhead and headerValueOverhead approximate
	// the heap an entry costs besides the bytes of its key, compressed body
	// and header strings: the cacheEntry, its list element and map slot;
	// per header, its slot in the header map and its value's string header
	// (GitHub sends ~25 headers, the fake ~10); TestCacheAtScale compares
	// the count with the heap it adds.
	entryOverhead       = 320
	headerKeyOverhead   = 64
	headerValueOverhead = 16
)

// coldOps are the operations whose answers enter the cache on probation
// (see "Scans" above).
var coldOps = map[string]bool{
	"issues.list-events": true,
}

// EndpointStats counts the requests of one operation (e.g. "pulls.get").
type EndpointStats struct {
	Requests    int64
	NotModified int64
}

// etagCache is a bounded LRU of GET answers shared by all installations
// (the key includes the installation id).
//
// The list runs from the most recently used entry (front) to the least
// (back); probationary entries form its tail, from coldHead (the newest) to
// the back (the oldest), behind every regular entry.
type etagCache struct {
	maxEntries int
	maxBytes   int64

	mu          sync.Mutex
	ll          *list.List
	entries     map[string]*list.Element
	bytes       int64         // sum of the entries' size
	coldHead    *list.Element // newest probationary entry; nil when there is none
	coldEntries int           // probationary entries
	coldBytes   int64         // and their size
	byOp        map[string]*EndpointStats

	requests    atomic.Int64
	notModified atomic.Int64
}

type cacheEntry struct {
	key          string
	etag         string
	lastModified string
	header       http.Header
	body         []byte // s2 block (s2.Encode) of the body
	size         int64  // what the entry counts against the byte bound
	cold         bool   // on probation
}

func newETagCache(maxEntries int, maxBytes int64) *etagCache {
	if maxEntries <= 0 {
		maxEntries = defaultCacheEntries
	}
	if maxBytes <= 0 {
		maxBytes = defaultCacheBytes
	}
	return &etagCache{maxEntries: maxEntries, maxBytes: maxBytes, ll: list.New(), entries: map[string]*list.Element{}, byOp: map[string]*EndpointStats{}}
}

// newCacheEntry compresses body into a new entry.
func newCacheEntry(key string, header http.Header, body []byte) *cacheEntry {
	buf := encodeBufs.Get().(*[]byte)
	enc := s2.Encode(*buf, body)
	e := &cacheEntry{
		key:          key,
		etag:         header.Get("ETag"),
		lastModified: header.Get("Last-Modified"),
		header:       header,
		// s2.Encode's result has the capacity of its worst case (more
		// than the raw body): keep a copy of the right size.
		body: bytes.Clone(enc),
	}
	if cap(enc) <= maxEncodeBuf {
		*buf = enc[:0]
		encodeBufs.Put(buf)
	}
	e.size = entryOverhead + int64(len(e.key)+cap(e.body))
	for k, vs := range header {
		e.size += int64(len(k)) + headerKeyOverhead
		for _, v := range vs {
			e.size += int64(len(v)) + headerValueOverhead
		}
	}
	return e
}

// encodeBufs are scratch buffers for s2.Encode, up to maxEncodeBuf (what
// the largest cached body needs).
var (
	encodeBufs   = sync.Pool{New: func() any { return new([]byte) }}
	maxEncodeBuf = s2.MaxEncodedLen(maxCachedBody)
)

// decodeBody returns the entry's body, uncompressed.
func (e *cacheEntry) decodeBody() ([]byte, error) {
	return s2.Decode(nil, e.body)
}

// get returns the entry for key, and makes it the most recently used; a
// probationary entry asked for again becomes a regular one.
func (c *etagCache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	c.promote(el)
	c.ll.MoveToFront(el)
	return el.Value.(*cacheEntry)
}

// put stores e (replacing the entry of the same key) and evicts until the
// cache is under its bounds. A cold entry enters on probation, unless its
// key was already cached (it was asked for again: get promoted it). It
// reports whether e was kept.
func (c *etagCache) put(e *cacheEntry, cold bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		c.removeElement(el)
		cold = false
	}
	if e.size > c.maxBytes/maxEntryShare {
		return false
	}
	var el *list.Element
	switch {
	case !cold:
		el = c.ll.PushFront(e)
	case c.coldHead != nil:
		el = c.ll.InsertBefore(e, c.coldHead)
	default:
		el = c.ll.PushBack(e)
	}
	c.entries[e.key] = el
	c.bytes += e.size
	if cold {
		e.cold = true
		c.coldHead = el
		c.coldEntries++
		c.coldBytes += e.size
	}
	// The back is the oldest probationary entry while there is one, then
	// the least recently used regular one. A probationary entry is newer
	// than those behind it, and the cache was under its bounds before it
	// came, so it is at worst evicted itself before either loop reaches a
	// regular entry.
	for c.coldEntries > max(1, c.maxEntries/maxColdShare) || c.coldBytes > c.maxBytes/maxColdShare {
		c.removeElement(c.ll.Back())
	}
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.removeElement(c.ll.Back())
	}
	_, kept := c.entries[e.key]
	return kept
}

func (c *etagCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.removeElement(el)
	}
}

// removeElement drops el. Called with c.mu held.
func (c *etagCache) removeElement(el *list.Element) {
	c.promote(el)
	e := el.Value.(*cacheEntry)
	c.ll.Remove(el)
	delete(c.entries, e.key)
	c.bytes -= e.size
}

// promote makes el a regular entry if it is on probation, taking it out of
// the probationary tail's accounting; the caller moves or removes it.
// Called with c.mu held.
func (c *etagCache) promote(el *list.Element) {
	e := el.Value.(*cacheEntry)
	if !e.cold {
		return
	}
	if c.coldHead == el {
		c.coldHead = el.Next() // the next older probationary entry, or nil
	}
	e.cold = false
	c.coldEntries--
	c.coldBytes -= e.size
}

// size returns the number of entries and the bytes they count.
func (c *etagCache) size() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len(), c.bytes
}

// CacheSize returns how many answers the conditional-request cache holds
// and the bytes they count against Config.CacheBytes (compressed bodies,
// headers, and an estimate of the per-entry overhead).
func (c *Client) CacheSize() (entries int, bytes int64) {
	return c.cache.size()
}

func (c *etagCache) count(op string, notModified bool) {
	c.requests.Add(1)
	if notModified {
		c.notModified.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.byOp[op]
	if s == nil {
		s = &EndpointStats{}
		c.byOp[op] = s
	}
	s.Requests++
	if notModified {
		s.NotModified++
	}
}

func (c *etagCache) endpointStats() map[string]EndpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]EndpointStats, len(c.byOp))
	for k, v := range c.byOp {
		out[k] = *v
	}
	return out
}

// cacheTransport is one installation's conditional-request layer, directly
// above the base transport.
type cacheTransport struct {
	inst  string
	cache *etagCache
	next  http.RoundTripper
}

func (t *cacheTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	op := Operation(req)
	if req.Method != http.MethodGet || req.Header.Get("Range") != "" {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			t.cache.count(op, false)
		}
		return resp, err
	}
	key := t.inst + " " + req.URL.String() + " " + req.Header.Get("Accept")
	cached := t.cache.get(key)
	orig := req
	if cached != nil && req.Header.Get("If-None-Match") == "" && req.Header.Get("If-Modified-Since") == "" {
		req = req.Clone(req.Context())
		if cached.etag != "" {
			req.Header.Set("If-None-Match", cached.etag)
		}
		if cached.lastModified != "" {
			req.Header.Set("If-Modified-Since", cached.lastModified)
		}
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && cached != nil:
		t.cache.count(op, true)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		body, err := cached.decodeBody()
		if err != nil {
			// Cannot happen (the block was encoded here), but if it did,
			// forget the entry and ask again, unconditionally.
			t.cache.remove(key)
			return t.RoundTrip(orig)
		}
		return cachedResponse(req, resp, cached, body), nil
	case resp.StatusCode == http.StatusOK && (resp.Header.Get("ETag") != "" || resp.Header.Get("Last-Modified") != ""):
		t.cache.count(op, false)
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
		if err != nil {
			resp.Body.Close()
			return nil, err
		}
		if len(body) > maxCachedBody {
			// Too big to keep: hand the rest through untouched.
			resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
			t.cache.remove(key)
			return resp, nil
		}
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		t.cache.put(newCacheEntry(key, keptHeaders(resp.Header), body), coldOps[op])
		return resp, nil
	default:
		t.cache.count(op, false)
		if resp.StatusCode == http.StatusOK {
			t.cache.remove(key)
		}
		return resp, nil
	}
}

// cachedHeaders are the headers of a 200 that its replay from the cache
// needs (go-github reads the pagination links and the media type); the
// rest of GitHub's ~25 (request ids, security headers, rate-limit ones,
// which the 304 brings fresh) would take most of a small entry's bytes.
var cachedHeaders = []string{"Content-Type", "Link", "Etag", "Last-Modified", "X-Github-Media-Type"}

func keptHeaders(h http.Header) http.Header {
	out := make(http.Header, len(cachedHeaders))
	for _, k := range cachedHeaders {
		if v := h.Values(k); len(v) > 0 {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// cachedResponse rebuilds a 200 from the cache entry, keeping the fresh
// rate-limit and date headers of the 304.
func cachedResponse(req *http.Request, notModified *http.Response, e *cacheEntry, body []byte) *http.Response {
	h := e.header.Clone()
	for k, v := range notModified.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-") || k == "Date" || k == "Etag" || k == "ETag" {
			h[k] = append([]string(nil), v...)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Mergegate-Cache", "revalidated")
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
		TLS:           notModified.TLS,
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// opKey carries the operation name in a request's context, for the
// per-operation stats and Operation.
type opKey struct{}

func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

// Operation names what a request to GitHub was sent for: the forge call's
// operation ("pulls.get", "checks.list-for-ref", ...),
// "apps.create-installation-access-token" for ghinstallation's token
// refresh, "other" for a request no forge call made. It is the one name of
// a GitHub operation in stats and metrics: a fixed set, whatever the paths
// hold. A transport below forge's (Config.Transport) reads it from the
// request it is given.
func Operation(req *http.Request) string {
	if strings.HasSuffix(req.URL.Path, "/access_tokens") {
		return "apps.create-installation-access-token"
	}
	if op, ok := req.Context().Value(opKey{}).(string); ok {
		return op
	}
	return "other"
}
