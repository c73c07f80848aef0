package leasedo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A payload is stored compressed and read back byte for byte; a tiny one
// and one that does not compress are stored as they came.
func TestBodiesStoredCompressed(t *testing.T) {
	ctx := context.Background()
	s, _ := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	payload, err := os.ReadFile(filepath.Join("..", "testdata", "github-webhooks", "ghes-35", "pull_request", "unlabeled.json"))
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 4096)
	x := uint64(88172645463325252)
	for i := range noise { // xorshift: nothing S2 can shorten
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		noise[i] = byte(x)
	}
	for id, body := range map[string][]byte{"big": payload, "tiny": []byte(`{}`), "noise": noise} {
		mustEnqueue(t, in, delivery(id, key, string(body)))
		if got := deliveryRow(t, s, id).Body; !bytes.Equal(got, body) {
			t.Fatalf("%s: read back %d bytes, stored %d: not the same", id, len(got), len(body))
		}
	}
	var enc string
	var n int
	if err := s.db.r.QueryRow(`SELECT b.encoding, length(b.body) FROM delivery_bodies b JOIN deliveries d USING (seq) WHERE d.delivery_id = 'big'`).Scan(&enc, &n); err != nil {
		t.Fatal(err)
	}
	if enc != bodyS2 || n*4 > len(payload) {
		t.Fatalf("a %d-byte payload stored as %q, %d bytes: want s2, under a quarter", len(payload), enc, n)
	}
	for _, id := range []string{"tiny", "noise"} {
		if err := s.db.r.QueryRow(`SELECT b.encoding FROM delivery_bodies b JOIN deliveries d USING (seq) WHERE d.delivery_id = ?`, id).Scan(&enc); err != nil || enc != bodyRaw {
			t.Fatalf("%s stored as %q (%v), want raw", id, enc, err)
		}
	}
	// What Drain hands to prepare is the payload as received.
	res, err := s.Drain(ctx, key, "worker", 16, func(d Delivery) (Batch, error) {
		if d.ID == "big" && !bytes.Equal(d.Body, payload) {
			t.Errorf("Drain gave prepare %d bytes, not the payload", len(d.Body))
		}
		return Batch{}, nil
	}, DrainPolicy{})
	if err != nil || len(res.Done) != 3 {
		t.Fatalf("drain: %+v %v", res, err)
	}
}

// A body that cannot be read back (raw rows from before migration 0003
// read fine; a damaged block does not) fails that delivery alone, kept
// with the reason; the ones after it are applied.
func TestDrainUnreadableBodyFailsThatDeliveryOnly(t *testing.T) {
	ctx := context.Background()
	s, _ := openTB(t, Options{})
	in := s.NewInbox(0)
	defer in.Close()
	enqueueJoins(t, in, key, 1, 2, 3)
	// PR 2's block is damaged: its header claims ~2 GB (a varint).
	if _, err := s.db.w.Exec(`UPDATE delivery_bodies SET encoding = 's2', body = x'ffffffff07ff00ff'
		WHERE seq = (SELECT seq FROM deliveries WHERE delivery_id = 'octo/hello-2')`); err != nil {
		t.Fatal(err)
	}
	// PR 3's row is as a row from before migration 0003: raw, no encoding.
	if _, err := s.db.w.Exec(`UPDATE delivery_bodies SET encoding = '', body = ? WHERE seq = (SELECT seq FROM deliveries WHERE delivery_id = 'octo/hello-3')`,
		deliveryRow(t, s, "octo/hello-3").Body); err != nil {
		t.Fatal(err)
	}
	res, err := s.Drain(ctx, key, "worker", 16, decodeEvent, DrainPolicy{})
	if err != nil || len(res.Done) != 3 || !res.Done[1].Failed || res.Done[0].Err != nil {
		t.Fatalf("drain: %+v %v", res, err)
	}
	if d := deliveryRowFailedOK(t, s, "octo/hello-2"); d.State != DeliveryFailed || !strings.Contains(d.LastError, "claims") {
		t.Fatalf("damaged body: %+v", d)
	}
	if got := queuedPRs(t, s, key); got != "1,3" {
		t.Fatalf("queue = %s", got)
	}
}

// deliveryRowFailedOK reads a delivery's row without its body (which may
// be unreadable).
func deliveryRowFailedOK(t *testing.T, s *Store, id string) Delivery {
	t.Helper()
	ds, err := s.deliveries(context.Background(), false, `WHERE d.delivery_id = ?`, id)
	if err != nil || len(ds) != 1 {
		t.Fatalf("delivery %s: %v %v", id, ds, err)
	}
	return ds[0]
}
