package leasedo

import (
	"context"
	"database/sql"
	"sync"
)

// Parsing SQL was a quarter of the CPU of applying an event (the driver
// prepares and finalizes every statement it runs). Statements run on the
// writer are therefore prepared once and reused: a statement seen for the
// first time runs as usual and is prepared on the writer connection before
// the next write transaction begins, while the connection is free.

// maxCachedStatements bounds the cache; the queries are a fixed set.
const maxCachedStatements = 256

type stmtCache struct {
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	want  map[string]bool // seen, to prepare before the next transaction
	bad   map[string]bool // failed to prepare: never tried again
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[string]*sql.Stmt{}, want: map[string]bool{}, bad: map[string]bool{}}
}

// get returns q's prepared statement, or nil after noting q for warm.
func (c *stmtCache) get(q string) *sql.Stmt {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[q]; ok {
		return st
	}
	if !c.bad[q] && len(c.stmts)+len(c.want) < maxCachedStatements {
		c.want[q] = true
	}
	return nil
}

// warm prepares the noted statements on w. It runs while the caller holds
// the writer's turn and no transaction is open, so w's connection is free.
func (c *stmtCache) warm(ctx context.Context, w *sql.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := range c.want {
		st, err := w.PrepareContext(ctx, q)
		if err != nil {
			c.bad[q] = true
		} else {
			c.stmts[q] = st
		}
		delete(c.want, q)
	}
}

func (c *stmtCache) pending() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.want) > 0
}

func (c *stmtCache) close() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

// wtx is a transaction that runs cached statements where it can.
//
// In a write transaction (stmts set) statements run without the caller's
// cancellation: the driver watches a cancellable context with a goroutine
// per statement, an allocation for every statement of the writer's, and a
// write transaction is short and all-or-nothing anyway. Waiting for the
// writer's turn (writerTurns) still follows the caller's context.
type wtx struct {
	*sql.Tx
	stmts *stmtCache // nil: plain (read transactions, PostgreSQL)
	pg    bool       // PostgreSQL: statements rebound (dialect.go)
	// after are run, in order, once the transaction committed (write).
	after []func()
}

// afterCommit runs fn once tx has committed; never if it does not.
func (t *wtx) afterCommit(fn func()) { t.after = append(t.after, fn) }

func (t *wtx) ctx(ctx context.Context) context.Context {
	if t.stmts != nil && ctx.Done() != nil {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (t *wtx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if t.pg {
		q, args = pgStatement(q, args)
		return t.Tx.ExecContext(ctx, q, args...)
	}
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.Tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, q, args...)
}

func (t *wtx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	if t.pg {
		q, args = pgStatement(q, args)
		return t.Tx.QueryRowContext(ctx, q, args...)
	}
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, q, args...)
}

func (t *wtx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if t.pg {
		q, args = pgStatement(q, args)
		return t.Tx.QueryContext(ctx, q, args...)
	}
	ctx = t.ctx(ctx)
	if st := t.stmts.get(q); st != nil {
		return t.Tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, q, args...)
}
