package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/migrations"
)

// migrate, reconcile and backup act on an existing database: a --db (or
// MERGEGATE_DB) that names no file is refused with an error naming both,
// and no file is created there.
func TestCommandsRefuseADatabaseThatDoesNotExist(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		for name, args := range map[string][]string{
			"migrate":   {"migrate"},
			"backup":    {"backup", "--to", filepath.Join(t.TempDir(), "copy.db")},
			"reconcile": {"reconcile", "--admin-addr", closedAddr(t), "--tenant", "1", "--repo", "a/b"},
		} {
			clearEnv(t)
			missing := filepath.Join(t.TempDir(), "typo.db")
			if viaEnv {
				t.Setenv("MERGEGATE_DB", missing)
			} else {
				args = append(args, "--db", missing)
			}
			var out, errOut bytes.Buffer
			code := run(args, &out, &errOut)
			msg := errOut.String()
			if code != 1 || !strings.Contains(msg, missing) || !strings.Contains(msg, "does not exist") ||
				!strings.Contains(msg, "--db") || !strings.Contains(msg, "MERGEGATE_DB") {
				t.Errorf("%s (env %v): exit %d, stderr %q: want 1 and an error naming the path, --db and MERGEGATE_DB", name, viaEnv, code, msg)
			}
			if viaEnv && !strings.Contains(msg, "from MERGEGATE_DB") {
				t.Errorf("%s: the error does not say the path came from MERGEGATE_DB: %q", name, msg)
			}
			if _, err := os.Stat(missing); !os.IsNotExist(err) {
				t.Errorf("%s (env %v): a database was created at %s (%v)", name, viaEnv, missing, err)
			}
		}
	}
}

// migrate applies the migrations: on an empty file it brings the schema to
// the latest version, and says so.
func TestMigrateAppliesToAnExistingFile(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "m.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate", "--db", db}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "schema version 0 -> ") {
		t.Fatalf("migrate: %d %q %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"migrate", "--db", db}, &out, &errOut); code != 0 || strings.Contains(out.String(), "version 0 ->") {
		t.Fatalf("migrate again: %d %q: the first run did not apply", code, out.String())
	}
}

// A database made before incremental auto-vacuum is rewritten once by the
// first migrate (or serve), which says so before and after on stderr; the
// next migrate does not rewrite it again.
func TestMigrateRewritesAnOlderDatabaseOnce(t *testing.T) {
	clearEnv(t)
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	old.SetMaxOpenConns(1)
	if _, _, err := migrations.Apply(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	old.Close()
	var out, errOut bytes.Buffer
	if code := run([]string{"migrate", "--db", path}, &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "rewriting the database once") || !strings.Contains(errOut.String(), "database rewritten") {
		t.Fatalf("migrate of an older database: %d %q %q", code, out.String(), errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"migrate", "--db", path}, &out, &errOut); code != 0 || strings.Contains(errOut.String(), "rewrit") {
		t.Fatalf("migrate again: %d %q: rewritten twice", code, errOut.String())
	}
}
