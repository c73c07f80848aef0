package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

// Set at build time: -ldflags "-X main.version=v1.2.3 -X main.commit=abc".
var (
	version = "dev"
	commit  = ""
)

const usage = `mergegate — a merge queue for GitHub, self-hosted

Usage:
  mergegate serve [flags]                      run the App (webhooks, queue, cron, admin API)
  mergegate replay [flags] FILE|DIR...         send recorded deliveries, or run them offline
  mergegate reconcile --tenant T --repo R      run the cron's pass for one repository now (by the running server, if one answers)
  mergegate migrate [--db FILE]                apply database migrations and exit
  mergegate backup --db FILE --to COPY         copy the database (and credentials) while it runs
  mergegate export --db FILE --tenant T --repo R --out DIR   write a repository's stored deliveries as a recording for replay
  mergegate migrate-store --from FILE --to DSN   copy a SQLite database into an empty PostgreSQL database (mergegate stopped)
  mergegate validate [FILE...]                 check .github/mergegate.yml files as the server reads them (stdin: none or -)
  mergegate healthcheck [--addr ADDR]          GET /healthz of a mergegate on this host (a container's HEALTHCHECK)
  mergegate version                            print version, commit, Go version and schema version
  mergegate help [COMMAND]                     this text, or a command's flags

Every flag also reads an environment variable (see 'mergegate help serve').
Exit status: 0 done, 1 failed, 2 a bad command line (a flag, a value, a command).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	migrations.Binary = version // recorded with each schema version this binary applies
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	var err error
	switch cmd {
	case "serve":
		err = serve(rest, stderr)
	case "migrate":
		err = migrate(rest, stdout, stderr)
	case "backup":
		err = backupCmd(rest, stdout, stderr)
	case "reconcile":
		err = reconcileCmd(rest, stdout, stderr)
	case "replay":
		err = replayCmd(rest, stdout, stderr)
	case "export":
		err = exportCmd(rest, stdout, stderr)
	case "migrate-store":
		err = migrateStoreCmd(rest, stdout, stderr)
	case "validate":
		err = validateCmd(rest, os.Stdin, stdout, stderr)
	case "healthcheck":
		err = healthcheckCmd(rest, stdout, stderr)
	case "version", "--version", "-version":
		if len(rest) > 0 {
			fmt.Fprintf(stderr, "mergegate version: unexpected arguments %q (mergegate help version)\n", rest)
			return 2
		}
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "--help", "-help":
		return help(rest, stdout)
	default:
		fmt.Fprintf(stderr, "mergegate: unknown command %q (mergegate help lists the commands)\n", cmd)
		return 2
	}
	return exitCode(err, cmd, stderr)
}

// exitCode says a command's error on stderr and gives its exit status: 0
// done (or help asked for), 2 a bad command line, 1 any other failure.
func exitCode(err error, cmd string, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "mergegate %s: %s\n", cmd, redactSecrets(err.Error()))
	var ue usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// usageError is a bad command line (exit 2).
type usageError struct{ error }

// help prints the command list, or what `mergegate NAME -h` prints.
func help(args []string, stdout io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage)
		return 0
	}
	switch args[0] {
	case "version", "help":
		printCommandHelp(stdout, args[0], nil)
		return 0
	}
	if _, ok := commandHelp[args[0]]; !ok {
		fmt.Fprintf(stdout, "mergegate help: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	return run([]string{args[0], "-h"}, stdout, stdout)
}

func versionString() string {
	return fmt.Sprintf("mergegate %s (commit %s, %s, schema version %d)", version, buildCommit(), runtime.Version(), migrations.Latest())
}

// buildCommit is the commit stamped in by -ldflags, else the one the Go
// toolchain recorded, else "unknown".
func buildCommit() string {
	c := commit
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	return c
}

func newLogger(v values, stderr io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(v["log-level"])
	if err != nil || v["log-level"] == "" {
		return zerolog.Logger{}, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", v["log-level"])}
	}
	var w io.Writer = stderr
	switch v["log-format"] {
	case "json":
	case "console":
		// Colour codes only for a terminal: in a file, a pipe or the
		// journal they are noise (and NO_COLOR turns them off anywhere).
		w = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.RFC3339,
			NoColor: !isTerminal(stderr) || os.Getenv("NO_COLOR") != ""}
	default:
		return zerolog.Logger{}, usageError{fmt.Errorf("--log-format %q: want json or console", v["log-format"])}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}

// isTerminal: w is a character device (a terminal), not a file, a pipe or
// a socket such as the journal's.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newApp builds mergegate from resolved settings: the logger, then the
// configuration (a bad value is a usage error), then the App.
func newApp(ctx context.Context, v values, stderr io.Writer) (*app.App, zerolog.Logger, error) {
	log, err := newLogger(v, stderr)
	if err != nil {
		return nil, log, v.explain(err)
	}
	cfg, err := v.appConfig()
	if err != nil {
		return nil, log, usageError{err}
	}
	cfg.Version, cfg.Commit = version, buildCommit()
	a, err := app.New(ctx, cfg, log)
	return a, log, err
}

func serve(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "serve")
	v, err := parseSettings(fs, serveSettings, args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, log, err := newApp(ctx, v, stderr)
	if err != nil {
		return err
	}
	if err := a.Start(); err != nil {
		a.Shutdown(context.Background()) //nolint:errcheck
		return err
	}
	<-ctx.Done()
	log.Info().Msg("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return a.Shutdown(sctx)
}

func dbSettings() []setting {
	var out []setting
	for _, s := range serveSettings {
		if s.name == "db" || s.name == "config" || s.name == "sync" {
			out = append(out, s)
		}
	}
	return out
}

// dbReadSettings are dbSettings without --sync, for the commands that
// only read the database (backup, export): they write no commit to sync.
func dbReadSettings() []setting {
	var out []setting
	for _, s := range dbSettings() {
		if s.name != "sync" {
			out = append(out, s)
		}
	}
	return out
}

func migrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "migrate")
	v, err := parseSettings(fs, dbSettings(), args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := existingDB(v); err != nil {
		return err
	}
	ctx := context.Background()
	// Read the version first so the answer can say what changed.
	ro, err := leasedo.Open(ctx, v["db"], leasedo.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	from, err := ro.SchemaVersion(ctx)
	ro.Close()
	if err != nil {
		return err
	}
	log := zerolog.New(stderr).With().Timestamp().Logger()
	db, err := leasedo.Open(ctx, v["db"], leasedo.Options{Sync: v["sync"], OnConvert: app.LogConversion(log, v["db"])})
	if err != nil {
		return err
	}
	defer db.Close()
	to, err := db.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: schema version %d -> %d\n", db.Describe(), from, to)
	return nil
}

// reconcileNotUsed are serve's settings a reconcile pass has no use for
// (it starts no listener, records nothing, prunes nothing and runs no
// cron): `mergegate help reconcile` does not list them, and they take
// their defaults.
var reconcileNotUsed = map[string]bool{"addr": true, "webhook-secret": true, "record": true, "retention": true,
	"body-retention": true, "redeliver-budget": true, "reconcile-every": true}

func reconcileSettings() []setting {
	var out []setting
	for _, s := range serveSettings {
		if !reconcileNotUsed[s.name] {
			out = append(out, s)
		}
	}
	return append(out,
		setting{"tenant", "", "", "installation id"},
		setting{"repo", "", "", "owner/name"},
	)
}

func reconcileCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "reconcile")
	v, err := parseSettings(fs, reconcileSettings(), args)
	if err != nil {
		return err
	}
	k := leasedo.Key{Tenant: v["tenant"], Repo: v["repo"]}
	if k.Tenant == "" || k.Repo == "" {
		return usageError{errors.New("--tenant and --repo are required")}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A running server is asked first: it acts on what the pass repairs.
	if err := reconcileViaServer(ctx, v, k, stdout, stderr); !errors.Is(err, errNoServer) {
		return err
	}
	if err := existingDB(v); err != nil {
		return fmt.Errorf("no server answers at --admin-addr %s, and %w", v["admin-addr"], err)
	}
	fmt.Fprintf(stderr, "mergegate reconcile: no server answers at --admin-addr %s; running the pass on the database %s directly\n", v["admin-addr"], leasedo.RedactDSN(v["db"]))
	for _, s := range serveSettings {
		if reconcileNotUsed[s.name] {
			v[s.name] = s.def
		}
	}
	a, _, err := newApp(ctx, v, stderr)
	if err != nil {
		return err
	}
	defer a.Shutdown(context.Background()) //nolint:errcheck
	ans, err := a.Reconciler.Pass(ctx, k)
	if err != nil {
		var le *leasedo.LockedError
		if errors.As(err, &le) {
			return fmt.Errorf("%s is locked (held by %s); the next pass reconciles it", k, le.HeldBy)
		}
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(ans)
}
