package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registered as "sqlite" (leasedo uses the same driver)

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/progress"
	"github.com/mergegate/mergegate/leasedo"
)

func backupSettings() []setting {
	return append(dbReadSettings(), setting{"to", "", "", "file to write the copy to (must not exist)"})
}

// backupCmd copies the database while mergegate runs: VACUUM INTO writes a
// consistent snapshot (one read transaction; the server keeps writing in
// WAL mode). The credentials file, when there is one, is copied beside the
// copy. The copy is checked (integrity, schema version) before the answer.
func backupCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "backup")
	v, err := parseSettings(fs, backupSettings(), args)
	if err != nil {
		return err
	}
	src, dst := v["db"], v["to"]
	if dst == "" {
		return usageError{errors.New("--to is required: the file to write the copy to")}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if leasedo.IsPostgresURL(src) {
		// VACUUM INTO is SQLite's; the connection string is not echoed
		// (it may hold a password).
		return usageError{fmt.Errorf("--db %s is a PostgreSQL database: back it up with the server's own tools, use pg_dump (docs/operations.md, \"Backups\")", leasedo.RedactDSN(src))}
	}
	if err := existingDB(v); err != nil {
		return err
	}
	credsSrc, credsDst := app.CredentialsPath(src), app.CredentialsPath(dst)
	for _, p := range []string{dst, credsDst} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists; not overwriting it", p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("mode", "ro")
	db, err := sql.Open("sqlite", "file:"+src+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	abs, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	// The copy holds the live pages: its size is the progress, sampled
	// while VACUUM INTO writes it.
	var pages, free, pageSize int64
	if err := db.QueryRowContext(ctx, `SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())`).Scan(&pages, &free, &pageSize); err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	meter := progress.New(stderr, "backup", max(pages-free, 0)*pageSize, progress.Bytes, progress.Options{})
	stopWatch := watchSize(abs, meter)
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, abs)
	stopWatch()
	if err != nil {
		return fmt.Errorf("backup %s: %w", src, err)
	}
	if fi, err := os.Stat(abs); err == nil {
		meter.Set(fi.Size())
	}
	meter.Done()
	if err := os.Chmod(dst, 0o600); err != nil {
		return err
	}
	cp, err := leasedo.Open(ctx, dst, leasedo.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("check the copy: %w", err)
	}
	defer cp.Close()
	ok, err := cp.IntegrityCheck(ctx)
	if err != nil || ok != "ok" {
		return fmt.Errorf("the copy %s fails its integrity check: %q %v", dst, ok, err)
	}
	schema, err := cp.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s -> %s (schema version %d, integrity ok)\n", src, dst, schema)
	if b, err := os.ReadFile(credsSrc); err == nil {
		if err := os.WriteFile(credsDst, b, 0o600); err != nil {
			return fmt.Errorf("copy the credentials file: %w", err)
		}
		fmt.Fprintf(stdout, "%s -> %s (the App's private key: keep it secret)\n", credsSrc, credsDst)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read the credentials file: %w", err)
	}
	return nil
}

// watchSize sets meter to the size of the file at path every 200 ms
// until the returned stop is called.
func watchSize(path string, meter *progress.Meter) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if fi, err := os.Stat(path); err == nil {
					meter.Set(fi.Size())
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}
