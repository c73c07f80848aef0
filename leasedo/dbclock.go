package leasedo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// dbClock is the database server's clock, as read from a replica: the
// system clock plus the offset to the server's, measured at open and
// again every dbClockEvery (the server's clock_timestamp(), taken as read
// half-way through the round trip). On PostgreSQL the Store judges leases
// on it (NewStore, when given the system clock): replicas whose own
// clocks disagree agree on a lease's age to within their round trips to
// the server, without a round trip per reading.
type dbClock struct {
	SystemClock
	offset atomic.Int64 // ns, server minus local
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

const dbClockEvery = 10 * time.Second

func (c *dbClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// startDBClock measures the offset once and keeps it up to date until
// stopClock.
func (db *DB) startDBClock(ctx context.Context) error {
	c := &dbClock{stop: make(chan struct{}), done: make(chan struct{})}
	if err := c.measure(ctx, db); err != nil {
		return err
	}
	db.clock = c
	go func() {
		defer close(c.done)
		t := time.NewTicker(dbClockEvery)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c.measure(ctx, db) //nolint:errcheck // the last offset stays; measured again next tick
				cancel()
			}
		}
	}()
	return nil
}

func (c *dbClock) measure(ctx context.Context, db *DB) error {
	var serverUS int64
	before := time.Now()
	err := db.r.QueryRowContext(ctx, `SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint`).Scan(&serverUS)
	after := time.Now()
	if err != nil {
		return err
	}
	mid := before.Add(after.Sub(before) / 2)
	c.offset.Store(time.UnixMicro(serverUS).Sub(mid).Nanoseconds())
	return nil
}

func (db *DB) stopClock() {
	if db.clock == nil {
		return
	}
	db.clock.once.Do(func() { close(db.clock.stop) })
	<-db.clock.done
}
