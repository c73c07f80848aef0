package leasedo

import "context"

// ProbeWrite is DB.ProbeWrite on the store's clock: why the database
// cannot be written now, or nil (GET /healthz).
func (s *Store) ProbeWrite(ctx context.Context) error { return s.db.ProbeWrite(ctx, s.now()) }
