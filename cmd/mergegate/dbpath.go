package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/mergegate/mergegate/leasedo"
)

// existingDB refuses a --db that names no file. Only `serve` creates the
// database: `migrate`, `reconcile` and `backup` act on one that exists, and
// a typo in the path would otherwise leave a new, empty database behind
// (and, for reconcile, rebuild queues in it that the server never sees).
//
// A PostgreSQL connection string names a database on a server, which
// Open connects to (or fails to): there is no file to look for.
func existingDB(v values) error {
	path := v["db"]
	if leasedo.IsPostgresURL(path) {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("the database %s does not exist (from %s): point --db or MERGEGATE_DB at mergegate's SQLite file (`mergegate serve` creates it)", path, v.source("db"))
	case err != nil:
		return fmt.Errorf("the database %s (from %s): %w", path, v.source("db"), err)
	case fi.IsDir():
		return fmt.Errorf("the database %s (from %s) is a folder: point --db or MERGEGATE_DB at mergegate's SQLite file", path, v.source("db"))
	}
	return nil
}
