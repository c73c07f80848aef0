package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/migrations"
)

// Replicas starting together on a new PostgreSQL database: each applies
// the set under the advisory lock, so every step is applied and recorded
// once, and each answers the latest version.
func TestApplyPostgresConcurrently(t *testing.T) {
	dsn := pgtest.URL(t)
	ctx := context.Background()
	const replicas = 4
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	tos := make([]int, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			_, tos[i], errs[i] = migrations.ApplyPostgres(ctx, db)
		}()
	}
	wg.Wait()
	latest := migrations.LatestOf(migrations.Postgres)
	for i := range replicas {
		if errs[i] != nil || tos[i] != latest {
			t.Fatalf("replica %d: ApplyPostgres → %d %v, want %d", i, tos[i], errs[i], latest)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, distinct int
	if err := db.QueryRow(`SELECT count(*), count(DISTINCT version) FROM schema_version`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != latest || distinct != latest {
		t.Fatalf("schema_version has %d rows (%d versions), want %d: each step once", rows, distinct, latest)
	}
	// Once more: nothing to do.
	if from, to, err := migrations.ApplyPostgres(ctx, db); err != nil || from != latest || to != latest {
		t.Fatalf("ApplyPostgres again = %d→%d %v, want %d→%d", from, to, err, latest, latest)
	}
	// A database a newer mergegate migrated is refused, and left alone.
	if _, err := db.Exec(`INSERT INTO schema_version (version, name, applied_at) VALUES ($1, 'future', 0)`, latest+1); err != nil {
		t.Fatal(err)
	}
	var tn *migrations.TooNewError
	if _, _, err := migrations.ApplyPostgres(ctx, db); !errors.As(err, &tn) || tn.DB != latest+1 {
		t.Fatalf("ApplyPostgres on a newer database: %v, want *TooNewError", err)
	}
}
