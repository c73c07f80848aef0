package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mergegate/mergegate/internal/loadgen"
	"github.com/mergegate/mergegate/webhook"
)

// loadState is shared by the senders of one target.
type loadState struct {
	client   *http.Client
	urls     []string // delivery i goes to urls[i mod len]
	secret   string
	gen      *loadgen.Generator
	base     int64 // first delivery index of this target
	hist     latHist
	all      *latHist // every round's, besides hist (this round's)
	sent     atomic.Int64
	acked    atomic.Int64
	errs     atomic.Int64
	bytes    atomic.Int64
	stMu     sync.Mutex
	statuses map[int]int
	lastAck  atomic.Int64 // unix ns
}

// bodyBufs recycles the senders' request bodies, and copyBufs the buffers
// the bodies are written to the connection through: a load generator
// should disturb the machine it measures as little as it can (what fresh
// ones would cost: docs/performance.md, "The load tool").
var (
	bodyBufs = sync.Pool{New: func() any { return new([]byte) }}
	copyBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}
)

// pooledConn writes a request body from a pooled buffer: net/http hands
// the body to the connection's ReadFrom, which for anything but a file
// allocates a buffer per call.
type pooledConn struct{ net.Conn }

func (c pooledConn) ReadFrom(r io.Reader) (int64, error) {
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, *buf)
}

func (s *loadState) send(ctx context.Context, i int64) {
	bp := bodyBufs.Get().(*[]byte)
	event, id, body := s.gen.AppendDelivery(*bp, s.base, i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.urls[i%int64(len(s.urls))], bytes.NewReader(body))
	if err != nil {
		s.errs.Add(1)
		return
	}
	req.Header.Set("User-Agent", "GitHub-Hookshot/mergegate-load")
	webhook.SignDelivery(req.Header, s.secret, event, id, body)
	s.sent.Add(1)
	s.bytes.Add(int64(len(body)))
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		s.errs.Add(1)
		return
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // reuse the connection
	resp.Body.Close()
	took := time.Since(t0)
	if resp.StatusCode == http.StatusAccepted {
		// Accepted after the whole body was read: the transport is done
		// with it. Another answer may come early, while the body is still
		// being written: that buffer is left to the collector.
		*bp = body
		bodyBufs.Put(bp)
		s.acked.Add(1)
		s.hist.add(took)
		if s.all != nil {
			s.all.add(took)
		}
		s.lastAck.Store(time.Now().UnixNano())
		return
	}
	s.stMu.Lock()
	s.statuses[resp.StatusCode]++
	s.stMu.Unlock()
}
