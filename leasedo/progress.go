package leasedo

import (
	"context"
	"fmt"
	"time"
)

// CountKeptDeliveries counts what KeptDeliveries would hand over (k's
// deliveries received at since or later whose body is kept): the total
// export's progress counts towards.
func (s *Store) CountKeptDeliveries(ctx context.Context, k Key, since time.Time) (int64, error) {
	var n int64
	err := s.db.r.QueryRowContext(ctx, `SELECT count(*) FROM deliveries d JOIN delivery_bodies kept ON kept.seq = d.seq
		WHERE d.tenant = ? AND d.repo = ? AND d.received_at >= ?`, k.Tenant, k.Repo, since.UnixMilli()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("%s: count kept deliveries: %w", k, err)
	}
	return n, nil
}
