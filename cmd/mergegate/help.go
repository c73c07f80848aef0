package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// commandHelp is what `mergegate help NAME` and `mergegate NAME -h` print,
// in one format: the synopsis, what the command does, then its flags.
var commandHelp = map[string]struct{ synopsis, about string }{
	"serve": {"serve [flags]",
		"Run the App: the webhook listener, the queues and their engine, the cron,\n" +
			"the admin API, the dashboard and /metrics. The first start creates and\n" +
			"migrates the database (--db)."},
	"replay": {"replay [flags] FILE|DIR...",
		"Send recorded deliveries (serve --record DIR) to a running mergegate at --url,\n" +
			"signed with --webhook-secret, or with --offline run them in-process against\n" +
			"a fake GitHub built from them and print the final state as JSON. Flags go\n" +
			"before the files. The guide: docs/replay.md."},
	"reconcile": {"reconcile --tenant T --repo R [flags]",
		"Run the cron's pass for one repository now. A server answering at\n" +
			"--admin-addr runs it (POST /reconcile), so that it acts on what the pass\n" +
			"repairs; when none answers, the pass runs on the database --db, which must\n" +
			"exist."},
	"migrate": {"migrate [--db FILE]",
		"Apply the database migrations to --db, which must exist, and print the\n" +
			"schema version before and after. serve migrates on start as well; migrate\n" +
			"does it ahead of a restart, or on a copy to see how long it takes."},
	"backup": {"backup --db FILE --to COPY",
		"Copy the database --db, which must exist, to --to while mergegate runs (a\n" +
			"consistent snapshot), with its credentials file beside it, and check the\n" +
			"copy's integrity and schema version."},
	"export": {"export --db FILE --tenant T --repo R [--since DURATION] --out DIR",
		"Write the deliveries of one repository stored in --db whose payloads are\n" +
			"still kept (--body-retention) into --out, a new or empty folder, as serve\n" +
			"--record writes them, in arrival order: mergegate replay --offline DIR\n" +
			"replays them. No signature or secret is written. --db may be in use by a\n" +
			"running mergegate."},
	"migrate-store": {"migrate-store --from FILE --to DSN",
		"Copy mergegate's SQLite database --from into the PostgreSQL database --to\n" +
			"(a postgres:// URL or libpq's key=value form), for a move to PostgreSQL.\n" +
			"Stop mergegate first: the file is read as it is, and what is written after\n" +
			"the copy is not moved. --from must be at this binary's schema version\n" +
			"(mergegate migrate --db FILE first); --to is migrated, must hold no rows,\n" +
			"and is filled in one transaction (all or nothing): every table, ids, the\n" +
			"inbox's order and the lease fence kept. It prints the rows and bytes of\n" +
			"each table; then start mergegate serve --db on the PostgreSQL database.\n" +
			"The password of --to is never printed (PGPASSWORD or ~/.pgpass keep it\n" +
			"out of the command line)."},
	"validate": {"validate [FILE...]",
		"Check repository policy files (.github/mergegate.yml) exactly as the server\n" +
			"reads them, and print each problem as FILE:LINE:COLUMN: PROBLEM. With no FILE,\n" +
			"or FILE -, it reads standard input. Exit 0 when every file is good, 1 when\n" +
			"one has a problem or cannot be read, 2 on a bad command line. For a\n" +
			"pre-commit hook or a CI step: docs/configuration.md."},
	"healthcheck": {"healthcheck [--addr ADDR]",
		"GET /healthz of the mergegate listening at --addr on this host (a host-less\n" +
			"or 0.0.0.0 address is asked on 127.0.0.1) and exit 0 when it answers 200,\n" +
			"1 otherwise, saying what it answered: a container's HEALTHCHECK, where the\n" +
			"image has no curl."},
	"version": {"version", "Print the version, the commit, the Go version it was built with and the\nschema version this binary expects."},
	"help":    {"help [COMMAND]", "Print the list of commands, or one command's help."},
}

// setUsage makes fs's -h print the command's help in the one format.
func setUsage(fs *flag.FlagSet, name string) {
	fs.Usage = func() { printCommandHelp(fs.Output(), name, fs) }
}

func printCommandHelp(w io.Writer, name string, fs *flag.FlagSet) {
	h := commandHelp[name]
	fmt.Fprintf(w, "usage: mergegate %s\n\n%s\n", h.synopsis, h.about)
	n := 0
	if fs != nil {
		fs.VisitAll(func(*flag.Flag) { n++ })
	}
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\nflags (one marked (env NAME) also reads that variable; a flag wins over\nthe environment, which wins over the --config file's key of the same name):\n")
	printFlags(w, fs)
}

// printFlags is flag.PrintDefaults with each flag written --name, as the
// docs and the error messages write it.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		line := "  --" + f.Name
		kind, usage := flag.UnquoteUsage(f)
		if kind != "" {
			line += " " + kind
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" {
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}
