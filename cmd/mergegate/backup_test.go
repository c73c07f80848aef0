package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/leasedo"
)

func TestBackupCopiesTheDatabaseAndCredentialsWhileOpen(t *testing.T) {
	clearEnv(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "mergegate.db")
	ctx := context.Background()
	// The server's database, open (WAL) while the backup runs.
	db, err := leasedo.Open(ctx, src, leasedo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := leasedo.NewStore(db, leasedo.Config{})
	k := leasedo.Key{Tenant: "1", Repo: "o/r"}
	if _, err := store.ProcessEvent(ctx, leasedo.Event{EventType: "pull_request", Action: "labeled", Op: leasedo.OpJoin, Tenant: k.Tenant, Repo: k.Repo,
		PRNumber: 4, Details: &leasedo.Details{Sha: strings.Repeat("a", 40)}}, "worker"); err != nil {
		t.Fatal(err)
	}
	if err := app.WriteCredentials(app.CredentialsPath(src), app.Credentials{AppID: 1, PrivateKey: "k", WebhookSecret: "s"}); err != nil {
		t.Fatal(err)
	}

	dst := filepath.Join(t.TempDir(), "copy.db")
	var out, errOut bytes.Buffer
	if code := run([]string{"backup", "--db", src, "--to", dst}, &out, &errOut); code != 0 {
		t.Fatalf("backup exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "integrity ok") {
		t.Fatalf("output: %s", out.String())
	}
	// Its progress goes to stderr, here no terminal: the last line says
	// the bytes written.
	if !regexp.MustCompile(`(?m)^backup: [0-9.]+ (kB|MB|bytes) done in `).MatchString(errOut.String()) {
		t.Errorf("stderr has no progress: %q", errOut.String())
	}
	for _, p := range []string{dst, app.CredentialsPath(dst)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", p, st.Mode().Perm())
		}
	}
	cp, err := leasedo.Open(ctx, dst, leasedo.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Close()
	q, err := leasedo.NewStore(cp, leasedo.Config{}).Queue(ctx, k)
	if err != nil || len(q) != 1 || q[0].PRNumber != 4 {
		t.Fatalf("the copy's queue = %+v, %v", q, err)
	}
	// Never over an existing file.
	if code := run([]string{"backup", "--db", src, "--to", dst}, &out, &errOut); code == 0 {
		t.Fatal("backup overwrote an existing copy")
	}
	if code := run([]string{"backup", "--db", src}, &out, &errOut); code != 2 {
		t.Fatalf("backup without --to exit %d, want 2", code)
	}
}
