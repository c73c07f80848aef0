package main

import (
	"bytes"
	"strings"
	"testing"
)

// Issue 30, hole 8: `mergegate reconcile` printed the whole connection
// string, password included, when no server answered, and `backup --db
// postgres://...` echoed it. No command's output names the password now,
// and backup says to use pg_dump.
func TestNoCommandPrintsTheDatabasePassword(t *testing.T) {
	clearEnv(t)
	const pw = "s3cret-Pw"
	for _, dsn := range []string{
		"postgres://mg:" + pw + "@127.0.0.1:1/mergegate?connect_timeout=2",
		"host=127.0.0.1 port=1 user=mg password=" + pw + " dbname=mergegate connect_timeout=2",
		"postgres://mg:" + pw + "@127.0.0.1:notaport/mergegate",
	} {
		for _, args := range [][]string{
			{"reconcile", "--db", dsn, "--tenant", "1", "--repo", "o/r", "--admin-addr", "127.0.0.1:1"},
			{"backup", "--db", dsn, "--to", t.TempDir() + "/copy.db"},
			{"export", "--db", dsn, "--tenant", "1", "--repo", "o/r", "--out", t.TempDir() + "/out"},
			{"migrate", "--db", dsn},
		} {
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			if code == 0 {
				t.Errorf("%s on an unreachable server: exit 0", args[0])
			}
			if all := out.String() + errOut.String(); strings.Contains(all, pw) {
				t.Errorf("%s printed the password:\n%s", args[0], all)
			}
			if args[0] == "backup" && !strings.Contains(errOut.String(), "use pg_dump") {
				t.Errorf("backup of a PostgreSQL database: %s", errOut.String())
			}
		}
	}
}
