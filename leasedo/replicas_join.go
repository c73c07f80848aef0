package leasedo

import (
	"context"
	"fmt"
)

// ReplicasBehind counts the live replicas other than name whose last
// heartbeat is older than name's: those that have not counted name yet,
// and so still take a share of each installation's request bound that
// leaves none for it. 0 when name has no row.
func (s *Store) ReplicasBehind(ctx context.Context, name string) (int, error) {
	var n int
	err := s.db.r.QueryRowContext(ctx, `SELECT count(*) FROM replicas WHERE name <> ? AND seen_at >= ?
		AND seen_at < (SELECT seen_at FROM replicas WHERE name = ?)`, name, s.now().UnixMilli()-ReplicaLive.Milliseconds(), name).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("replica %s: count the replicas that have not counted it: %w", name, err)
	}
	return n, nil
}
