package leasedo

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDatabaseFilesArePrivate: the database and its -wal and -shm files,
// which hold every payload, are created 0600 whatever the umask.
func TestDatabaseFilesArePrivate(t *testing.T) {
	for _, umask := range []int{0, 0o022, 0o277} {
		old := syscall.Umask(umask)
		path := filepath.Join(t.TempDir(), "private.db")
		db, err := Open(context.Background(), path, Options{})
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		// A write, so that the WAL has frames and both files exist.
		if err := db.LimitPages(context.Background(), -1); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{path, path + "-wal", path + "-shm"} {
			st, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			if mode := st.Mode().Perm(); mode != 0o600 {
				t.Errorf("umask %03o: %s is %03o, want 600", umask, filepath.Base(name), mode)
			}
		}
		db.Close()
	}
}
