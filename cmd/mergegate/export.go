package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/progress"
	"github.com/mergegate/mergegate/leasedo"
)

func exportSettings() []setting {
	return append(dbReadSettings(),
		setting{"tenant", "", "", "installation id"},
		setting{"repo", "", "", "owner/name"},
		setting{"since", "", "", "only deliveries received this long ago or later (e.g. 6h); empty: every delivery whose body is kept"},
		setting{"out", "", "", "folder to write the recorded deliveries into (new or empty)"},
	)
}

// exportCmd writes a repository's stored deliveries as a recording that
// `mergegate replay` reads (docs/replay.md), from the database of a
// running or stopped mergegate.
func exportCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "export")
	v, err := parseSettings(fs, exportSettings(), args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	k := leasedo.Key{Tenant: v["tenant"], Repo: v["repo"]}
	if k.Tenant == "" || k.Repo == "" || v["out"] == "" {
		return usageError{errors.New("--tenant, --repo and --out are required")}
	}
	var since time.Time
	if s := v["since"]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return usageError{fmt.Errorf("--since %q: want a duration like 6h", s)}
		}
		since = time.Now().Add(-d)
	}
	if err := existingDB(v); err != nil {
		return err
	}
	ctx := context.Background()
	db, err := leasedo.Open(ctx, v["db"], leasedo.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	store := leasedo.NewStore(db, leasedo.Config{})
	total, err := store.CountKeptDeliveries(ctx, k, since)
	if err != nil {
		return err
	}
	meter := progress.New(stderr, "export", total, progress.Unit("deliveries"), progress.Options{})
	n, err := app.ExportEach(ctx, store, k, since, v["out"], func() { meter.Add(1) })
	if err != nil {
		return err
	}
	if n > 0 {
		meter.Done()
	}
	if n == 0 {
		return fmt.Errorf("no delivery of %s with its body kept in %s (bodies of applied deliveries are kept for --body-retention, 24h by default)", k, leasedo.RedactDSN(v["db"]))
	}
	fmt.Fprintf(stdout, "%d deliveries of %s written to %s in arrival order; replay them with: mergegate replay --offline %s\n", n, k, v["out"], v["out"])
	return nil
}
