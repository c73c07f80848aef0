package leasedo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks run with sync=normal (the default: WAL, no fsync per commit)
// and sync=full (every commit fsynced), and report ops/s besides ns/op:
//
//	go test -run '^$' -bench . -benchtime 2000x ./leasedo/

var syncModes = []string{"normal", "full"}

// benchKeys is n repositories of one installation.
func benchKeys(n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Tenant: "42", Repo: fmt.Sprintf("octo/repo-%03d", i)}
	}
	return keys
}

func reportOps(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			s, _ := openTB(b, Options{Sync: mode})
			ctx := context.Background()
			for b.Loop() {
				l, err := s.Acquire(ctx, key, "worker")
				if err != nil {
					b.Fatal(err)
				}
				if ok, err := s.Release(ctx, l); !ok || err != nil {
					b.Fatalf("release: %v %v", ok, err)
				}
			}
			reportOps(b)
		})
	}
}

// BenchmarkProcessEvent: POST /event's process (acquire, apply, release:
// three transactions), a join then a leave of the same PR, alternating, on
// one repo or spread over 100.
func BenchmarkProcessEvent(b *testing.B) {
	for _, repos := range []int{1, 100} {
		for _, mode := range syncModes {
			b.Run(fmt.Sprintf("repos=%d/sync=%s", repos, mode), func(b *testing.B) {
				s, _ := openTB(b, Options{Sync: mode})
				ctx := context.Background()
				keys := benchKeys(repos)
				i := 0
				for b.Loop() {
					k := keys[i%repos]
					ev := Event{EventType: "pull_request", Tenant: k.Tenant, Repo: k.Repo, Action: "labeled", Op: OpJoin, PRNumber: 7, Details: &Details{Sha: "abc123"}}
					want := ResultJoined
					if (i/repos)%2 == 1 {
						ev.Action, ev.Op, ev.Details, want = "unlabeled", OpLeave, nil, ResultLeft
					}
					r, err := s.ProcessEvent(ctx, ev, "worker")
					if err != nil || r.Result != want {
						b.Fatalf("event %d: %+v %v, want %s", i, r, err, want)
					}
					i++
				}
				reportOps(b)
			})
		}
	}
}

// BenchmarkInboxEnqueueParallel: concurrent webhook handlers storing 24 KB
// deliveries through the group-committing inbox.
func BenchmarkInboxEnqueueParallel(b *testing.B) {
	body := bytes.Repeat([]byte(`{"action":"synchronize","pull_request":{"number":1}}`), 24<<10/52+1)[:24<<10]
	for _, mode := range syncModes {
		b.Run("sync="+mode, func(b *testing.B) {
			s, _ := openTB(b, Options{Sync: mode})
			in := s.NewInbox(0)
			defer in.Close()
			ctx := context.Background()
			var n atomic.Int64
			b.SetBytes(int64(len(body)))
			b.SetParallelism(16) // 16 handlers per CPU
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := fmt.Sprintf("delivery-%d", n.Add(1))
					d := Delivery{ID: id, Event: "pull_request", Action: "synchronize", Tenant: "42", Repo: "octo/hello", Body: body, ReceivedAt: t0}
					if dup, err := in.Enqueue(ctx, d); err != nil || dup {
						b.Errorf("enqueue %s: %v %v", id, dup, err)
						return
					}
				}
			})
			b.StopTimer()
			reportOps(b)
			if got := countRows(b, s, `SELECT count(*) FROM deliveries`); got != int(n.Load()) {
				b.Fatalf("%d deliveries stored, %d enqueued", got, n.Load())
			}
		})
	}
}

// BenchmarkDrain: the engine's path for stored deliveries. Each iteration
// stores one join-or-leave delivery per repository (not timed) and drains
// every repository once (timed): one transaction per repository that
// takes and gives back the lease, reads the body, applies and marks the
// delivery done. ops/s counts deliveries applied.
func BenchmarkDrain(b *testing.B) {
	for _, repos := range []int{1, 100} {
		for _, mode := range syncModes {
			b.Run(fmt.Sprintf("repos=%d/sync=%s", repos, mode), func(b *testing.B) {
				s, _ := openTB(b, Options{Sync: mode})
				in := s.NewInbox(0)
				defer in.Close()
				ctx := context.Background()
				keys := benchKeys(repos)
				n := 0
				for b.Loop() {
					b.StopTimer()
					for _, k := range keys {
						ev := Event{EventType: "pull_request", Tenant: k.Tenant, Repo: k.Repo, Action: "labeled", Op: OpJoin, PRNumber: 7, Details: &Details{Sha: "abc123"}}
						if n%2 == 1 {
							ev.Action, ev.Details = "unlabeled", nil
						}
						body, _ := json.Marshal(ev)
						if _, err := in.Enqueue(ctx, Delivery{ID: fmt.Sprintf("d-%d-%s", n, k.Repo), Event: "pull_request", Tenant: k.Tenant, Repo: k.Repo, Body: body, ReceivedAt: t0}); err != nil {
							b.Fatal(err)
						}
					}
					n++
					b.StartTimer()
					for _, k := range keys {
						out, err := s.Drain(ctx, k, "worker", 16, decodeEvent, DrainPolicy{})
						if err != nil || len(out.Done) != 1 || out.Done[0].Err != nil {
							b.Fatalf("drain %s: %+v %v", k, out, err)
						}
					}
				}
				b.ReportMetric(float64(b.N*repos)/b.Elapsed().Seconds(), "ops/s")
			})
		}
	}
}

// BenchmarkFreePagesStep: how long one FreePages step holds the writer
// (what a delivery's commit may wait behind it), with the free pages
// scattered among live ones as a prune leaves them, so that the step
// moves pages as well as truncating the file.
func BenchmarkFreePagesStep(b *testing.B) {
	s, _ := openTB(b, Options{})
	db := s.db
	var steps int
	var held time.Duration
	for b.Loop() {
		b.StopTimer()
		if _, err := db.w.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 4000)
			INSERT INTO delivery_bodies (body) SELECT randomblob(3200) FROM n`); err != nil {
			b.Fatal(err)
		}
		if _, err := db.w.Exec(`DELETE FROM delivery_bodies WHERE seq % 4 != 0`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for {
			start := time.Now()
			_, more, err := db.FreePages(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			held += time.Since(start)
			steps++
			if !more {
				break
			}
		}
	}
	b.ReportMetric(float64(held.Microseconds())/float64(steps), "µs/step")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}
