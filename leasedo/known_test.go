package leasedo

import (
	"context"
	"fmt"
	"testing"
)

func TestKnownDeliveries(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		s, _ := openTB(t, Options{})
		in := s.NewInbox(0)
		defer in.Close()
		k := Key{Tenant: "1", Repo: "o/r"}
		ctx := context.Background()
		for i := 0; i < 450; i += 2 { // every even id, across several lookup chunks
			if _, err := in.Enqueue(ctx, delivery(fmt.Sprintf("guid-%d", i), k, `{}`)); err != nil {
				t.Fatal(err)
			}
		}
		var ids []string
		for i := 0; i < 450; i++ {
			ids = append(ids, fmt.Sprintf("guid-%d", i))
		}
		known, err := s.KnownDeliveries(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		if len(known) != 225 {
			t.Fatalf("%d known, want 225", len(known))
		}
		for i := 0; i < 450; i++ {
			if known[fmt.Sprintf("guid-%d", i)] != (i%2 == 0) {
				t.Fatalf("guid-%d known = %v", i, !(i%2 == 0))
			}
		}
		if known, err := s.KnownDeliveries(ctx, nil); err != nil || len(known) != 0 {
			t.Fatalf("no ids: %v %v", known, err)
		}
	})
}
