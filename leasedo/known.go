package leasedo

import (
	"context"
	"fmt"
	"strings"
)

// knownChunk bounds the ids of one lookup query (SQLite's default limit on
// bound parameters is 32766; a short IN list keeps each query cheap).
const knownChunk = 200

// KnownDeliveries returns which of ids (X-GitHub-Delivery values) the inbox
// holds, in any state. A delivery pruned after the retention period is no
// longer known. Each id is looked up in the unique index on delivery_id.
func (s *Store) KnownDeliveries(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(knownChunk, len(ids))]
		ids = ids[len(chunk):]
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		q := `SELECT delivery_id FROM deliveries WHERE delivery_id IN (?` + strings.Repeat(`, ?`, len(chunk)-1) + `)`
		if err := func() error {
			rows, err := s.db.r.QueryContext(ctx, q, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				out[id] = true
			}
			return rows.Err()
		}(); err != nil {
			return nil, fmt.Errorf("look up deliveries: %w", err)
		}
	}
	return out, nil
}
