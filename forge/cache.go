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
)

// Conditional requests. GitHub does not count a 304 Not Modified answer
// against the rate limit, so every GET goes out with If-None-Match (and
// If-Modified-Since) when an earlier answer for the same URL is cached, and a
// 304 is handed to go-github as the cached 200. The cache never answers
// without asking GitHub, so it cannot serve stale data.

const (
	defaultCacheEntries = 10000
	maxCachedBody       = 1 << 20 // larger bodies are not cached
)

// EndpointStats counts the requests of one operation (e.g. "pulls.get").
type EndpointStats struct {
	Requests    int64
	NotModified int64
}

// etagCache is a bounded LRU of GET answers shared by all installations
// (the key includes the installation id).
type etagCache struct {
	max int

	mu      sync.Mutex
	ll      *list.List // front = most recently used
	entries map[string]*list.Element
	byOp    map[string]*EndpointStats

	requests    atomic.Int64
	notModified atomic.Int64
}

type cacheEntry struct {
	key          string
	etag         string
	lastModified string
	header       http.Header
	body         []byte
}

func newETagCache(max int) *etagCache {
	if max <= 0 {
		max = defaultCacheEntries
	}
	return &etagCache{max: max, ll: list.New(), entries: map[string]*list.Element{}, byOp: map[string]*EndpointStats{}}
}

func (c *etagCache) get(key string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*cacheEntry)
	}
	return nil
}

func (c *etagCache) put(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[e.key]; ok {
		el.Value = e
		c.ll.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.ll.PushFront(e)
	for c.ll.Len() > c.max {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
}

func (c *etagCache) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.ll.Remove(el)
		delete(c.entries, key)
	}
}

func (c *etagCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
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
	op := opFrom(req)
	if req.Method != http.MethodGet || req.Header.Get("Range") != "" {
		resp, err := t.next.RoundTrip(req)
		if err == nil {
			t.cache.count(op, false)
		}
		return resp, err
	}
	key := t.inst + " " + req.URL.String() + " " + req.Header.Get("Accept")
	cached := t.cache.get(key)
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
		return cachedResponse(req, resp, cached), nil
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
		t.cache.put(&cacheEntry{
			key:          key,
			etag:         resp.Header.Get("ETag"),
			lastModified: resp.Header.Get("Last-Modified"),
			header:       resp.Header.Clone(),
			body:         body,
		})
		return resp, nil
	default:
		t.cache.count(op, false)
		if resp.StatusCode == http.StatusOK {
			t.cache.remove(key)
		}
		return resp, nil
	}
}

// cachedResponse rebuilds a 200 from the cache entry, keeping the fresh
// rate-limit and date headers of the 304.
func cachedResponse(req *http.Request, notModified *http.Response, e *cacheEntry) *http.Response {
	h := e.header.Clone()
	for k, v := range notModified.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-ratelimit-") || k == "Date" || k == "Etag" || k == "ETag" {
			h[k] = append([]string(nil), v...)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(e.body)))
	h.Set("X-Mergegate-Cache", "revalidated")
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Request:       req,
		TLS:           notModified.TLS,
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// opKey carries the operation name (for per-endpoint stats) in a request's
// context.
type opKey struct{}

func withOp(ctx context.Context, op string) context.Context {
	return context.WithValue(ctx, opKey{}, op)
}

func opFrom(req *http.Request) string {
	if strings.HasSuffix(req.URL.Path, "/access_tokens") {
		return "apps.create-installation-access-token"
	}
	if op, ok := req.Context().Value(opKey{}).(string); ok {
		return op
	}
	return "other"
}
