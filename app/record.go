package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// Recorded is one delivery as `serve --record` writes it and `replay`
// reads it (docs/replay.md). Signatures and secrets are never recorded: replay
// signs with its own configured secret.
type Recorded struct {
	Event    string            `json:"event"`
	Delivery string            `json:"delivery"`
	Headers  map[string]string `json:"headers"`
	Payload  json.RawMessage   `json:"payload"`
}

// Recorder writes every accepted delivery into a folder, one file each,
// named so that `ls` lists them in arrival order.
type Recorder struct {
	dir string
	mu  sync.Mutex
	n   int
}

// NewRecorder creates dir if needed and continues its numbering.
func NewRecorder(dir string) (*Recorder, error) {
	// Payloads are as private as the database: the folder 0700, each
	// file 0600 (an existing folder is narrowed to 0700).
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--record %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("--record %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--record %s: %w", dir, err)
	}
	n := 0
	for _, e := range entries {
		var k int
		if _, err := fmt.Sscanf(e.Name(), "%06d-", &k); err == nil && k > n {
			n = k
		}
	}
	return &Recorder{dir: dir, n: n}, nil
}

// Record writes d (atomically: a temporary file renamed into place).
func (r *Recorder) Record(d leasedo.Delivery) error {
	rec := Recorded{
		Event: d.Event, Delivery: d.ID,
		Headers: map[string]string{
			"X-GitHub-Event":    d.Event,
			"X-GitHub-Delivery": d.ID,
			"Content-Type":      "application/json",
		},
		Payload: json.RawMessage(d.Body),
	}
	// The payload as received: indenting changes only whitespace, and
	// without HTML escaping (<, >, & kept as they came) compacting the
	// recorded payload gives back the bytes GitHub sent.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rec); err != nil {
		return fmt.Errorf("record %s: %w", d.ID, err)
	}
	r.mu.Lock()
	r.n++
	name := fmt.Sprintf("%06d-%s-%s.json", r.n, namePart(d.Event, maxEventPart), namePart(d.ID, maxIDPart))
	r.mu.Unlock()
	tmp := filepath.Join(r.dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("record %s: %w", d.ID, err)
	}
	if err := os.Rename(tmp, filepath.Join(r.dir, name)); err != nil {
		return fmt.Errorf("record %s: %w", d.ID, err)
	}
	return nil
}

// Bounds of the parts of a recorded file's name, well under the 255 bytes
// a file name may have: a GUID delivery id (36) and GitHub's event names
// fit as they are.
const (
	maxEventPart = 40
	maxIDPart    = 100
)

// namePart is s as part of a file name: s itself when it is made of
// letters, digits, - and _ only and fits max bytes, else h- and a hash of
// s, so that no id or event name (too long, all dots, a path) keeps a
// delivery from being recorded. The file's content keeps the real value.
func namePart(s string, max int) string {
	if s != "" && len(s) <= max && safeName(s) == s {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return "h-" + hex.EncodeToString(sum[:12])
}

func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '_'
	}, s)
}

// Export writes k's stored deliveries whose bodies are still kept (the
// body retention), received at or after since, into dir as `serve
// --record` would have recorded them, in arrival order: a scenario for
// `mergegate replay`. Only the event and delivery id headers are written,
// as a recording holds them; no signature or secret is stored to begin
// with. dir is created; one that holds files is refused, so that two
// exports never mix. It returns how many deliveries it wrote.
func Export(ctx context.Context, store *leasedo.Store, k leasedo.Key, since time.Time, dir string) (int, error) {
	return ExportEach(ctx, store, k, since, dir, nil)
}

// ExportEach is Export, calling each (when not nil) after each delivery
// written: mergegate export's progress.
func ExportEach(ctx context.Context, store *leasedo.Store, k leasedo.Key, since time.Time, dir string, each func()) (int, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return 0, fmt.Errorf("--out %s holds files already: export into a new or empty folder", dir)
	}
	r, err := NewRecorder(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	err = store.KeptDeliveries(ctx, k, since, func(d leasedo.Delivery) error {
		if err := r.Record(d); err != nil {
			return err
		}
		n++
		if each != nil {
			each()
		}
		return nil
	})
	return n, err
}
