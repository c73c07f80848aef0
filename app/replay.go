package app

import (
	"context"
	"errors"
)

// ReplayOptions tune an offline replay.
type ReplayOptions struct{}

// ReplayOffline runs recorded deliveries in-process against a fake GitHub
// and returns the final state as JSON (SPEC §8).
func ReplayOffline(ctx context.Context, recs []Recorded, opt ReplayOptions) ([]byte, error) {
	return nil, errors.New("offline replay is not built yet")
}
