package leasedo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"
)

// TestLastWriteFailureIsKeptUntilAWriteCommits: a write refused for want
// of storage is reported until a write commits; a refusal that is not
// about storage (a lease held) is not.
func TestLastWriteFailureIsKeptUntilAWriteCommits(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "wf.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db, Config{})
	in := s.NewInbox(0)
	defer in.Close()
	big := make([]byte, 256<<10)
	rand.Read(big) // incompressible: needs new pages
	body := []byte(`{"pad":"` + hex.EncodeToString(big) + `"}`)
	d := Delivery{ID: "d1", Event: "push", Tenant: "1", Repo: "o/r", Body: body, ReceivedAt: time.Now(), State: DeliveryPending}

	k := Key{Tenant: "1", Repo: "o/r"}
	if _, err := s.Acquire(ctx, k, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, k, "b"); !IsLocked(err) {
		t.Fatalf("second acquire: %v", err)
	}
	if f := db.LastWriteFailure(); f != nil {
		t.Fatalf("a held lease reported as a storage failure: %v", f.Err)
	}

	if err := db.LimitPages(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Enqueue(ctx, d); err == nil {
		t.Fatal("a delivery was stored on a full database")
	}
	f := db.LastWriteFailure()
	if f == nil || !IsStorageError(f.Err) {
		t.Fatalf("LastWriteFailure = %+v after SQLITE_FULL", f)
	}
	if err := db.LimitPages(ctx, -1); err != nil { // a write that commits
		t.Fatal(err)
	}
	if f := db.LastWriteFailure(); f != nil {
		t.Fatalf("still failing after a commit: %v", f.Err)
	}
}
