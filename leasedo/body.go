package leasedo

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Bodies are stored as S2 blocks (github.com/klauspost/compress/s2): a
// 28 KB payload becomes 3.9 KB in ~10 µs and is read back in ~4 µs, so a
// body fits in one 4 KiB page instead of seven, which is most of what a
// webhook's commit writes to the WAL and the checkpointer copies back.

const (
	bodyRaw = ""   // stored as received (rows written before migration 0003)
	bodyS2  = "s2" // an S2 block
)

// encodeBufs recycles the compression buffers: s2.Encode needs room for
// the worst case (a little more than the input), 25-30 KB a delivery, and
// at the 1,000 deliveries/s processing must keep up with, that garbage
// alone would make the collector run several times a second, each run
// holding one of a small VM's two cores.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf keeps a rare huge payload's buffer out of the pool.
const maxPooledBuf = 1 << 20

// encodeBody returns how to store raw: compressed unless that does not
// make it smaller. stored is valid until done is called.
func encodeBody(raw []byte) (encoding string, stored []byte, done func()) {
	nothing := func() {}
	if len(raw) < 64 {
		return bodyRaw, raw, nothing
	}
	n := s2.MaxEncodedLen(len(raw))
	if n < 0 {
		return bodyRaw, raw, nothing // too large to compress in one block
	}
	buf := encodeBufs.Get().(*[]byte)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	c := s2.Encode((*buf)[:n], raw)
	done = func() {
		if cap(*buf) <= maxPooledBuf {
			encodeBufs.Put(buf)
		}
	}
	if len(c) >= len(raw) {
		done()
		return bodyRaw, raw, nothing
	}
	return bodyS2, c, done
}

// decodeBody returns the body as received.
func decodeBody(encoding string, stored []byte) ([]byte, error) {
	switch encoding {
	case bodyRaw:
		return stored, nil
	case bodyS2:
		if _, err := decodedLen(stored); err != nil {
			return nil, err
		}
		b, err := s2.Decode(nil, stored)
		if err != nil {
			return nil, fmt.Errorf("stored body: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("stored body: unknown encoding %q", encoding)
}

// decodeBufs recycles the buffers bodies are read back into (Drain).
var decodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// decodeBodyPooled is decodeBody into a reused buffer: body is valid
// until release is called.
func decodeBodyPooled(encoding string, stored []byte) (body []byte, release func(), err error) {
	nothing := func() {}
	if encoding != bodyS2 {
		body, err = decodeBody(encoding, stored)
		return body, nothing, err
	}
	n, err := decodedLen(stored)
	if err != nil {
		return nil, nothing, err
	}
	buf := decodeBufs.Get().(*[]byte)
	if cap(*buf) < n {
		*buf = make([]byte, n)
	}
	release = func() {
		if cap(*buf) <= maxPooledBuf {
			decodeBufs.Put(buf)
		}
	}
	body, err = s2.Decode((*buf)[:n], stored)
	if err != nil {
		release()
		return nil, nothing, fmt.Errorf("stored body: %w", err)
	}
	return body, release, nil
}

// maxStoredBody bounds what a stored block may claim to decode to: GitHub
// caps payloads at 25 MiB, and a damaged header must not make us allocate
// gigabytes.
const maxStoredBody = 32 << 20

func decodedLen(stored []byte) (int, error) {
	n, err := s2.DecodedLen(stored)
	if err != nil {
		return 0, fmt.Errorf("stored body: %w", err)
	}
	if n > maxStoredBody {
		return 0, fmt.Errorf("stored body: claims %d bytes, more than a payload can be", n)
	}
	return n, nil
}
