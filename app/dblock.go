package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// errLocked: another process serves the SQLite file (lockDB).
var errLocked = errors.New("the database is locked by another process")

// lockDB makes a SQLite database one process's: an exclusive lock
// (flock(2), where the system has it) on the file <db>.lock, held while
// the App runs, the holder's pid, host and replica name written in it. A
// second mergegate on the same file is refused with those. SQLite's own
// locks are per transaction: two processes would both run, each merging
// in the same repositories. A lock dies with its process (kill -9
// included); the file stays, and the next process takes it. A PostgreSQL
// database takes several replicas and is not locked. Nil release: no
// lock to give back.
func lockDB(path, replica string) (release func(), err error) {
	if leasedo.IsPostgresURL(path) || path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return func() {}, nil
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the database %s: %w", path, err)
	}
	if err := flock(f); err != nil {
		holder := make([]byte, 512)
		n, _ := f.ReadAt(holder, 0)
		f.Close()
		if errors.Is(err, errLocked) {
			who := strings.TrimSpace(string(holder[:n]))
			if who == "" {
				who = "a process that has not said who it is yet"
			}
			return nil, fmt.Errorf("the database %s is served by another mergegate: %s (lock %s.lock). One SQLite file takes one process: stop that one, or give this one its own --db; several replicas need PostgreSQL (docs/operations.md, \"Running several replicas\")",
				path, who, path)
		}
		return nil, fmt.Errorf("lock the database %s: %w", path, err)
	}
	host, _ := os.Hostname()
	note := fmt.Sprintf("pid %d on host %s (replica %s), since %s\n", os.Getpid(), host, replica, time.Now().UTC().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(note), 0)
	}
	return func() { f.Close() }, nil
}
