package main

import (
	"errors"
	"fmt"
	"os"
)

// existingDB refuses a --db that names no file. Only `serve` creates the
// database: `migrate`, `reconcile` and `backup` act on one that exists, and
// a typo in the path would otherwise leave a new, empty database behind
// (and, for reconcile, rebuild queues in it that the server never sees).
func existingDB(v values) error {
	path := v["db"]
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
