package app

import (
	"bufio"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit/pgtest"
	"github.com/mergegate/mergegate/leasedo"
)

// On PostgreSQL the set-up page refuses, saying what to do instead, and
// no file is made or read at a path built from the connection string
// (which names no folder): the page, the callback (even with a valid
// state) and the start all leave none.
func TestSetupPageOnPostgresRefusesWithWhatToDo(t *testing.T) {
	dsn := pgtest.URL(t)
	clk := leasedo.NewManualClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	cfg := bareConfig(gh.URL(), clk, t.TempDir())
	cfg.DB = dsn
	wd := t.TempDir()
	t.Chdir(wd) // CredentialsPath(dsn) is relative: it would land here
	h, _ := startApp(t, gh, clk, cfg)
	c := browser(t)
	for _, path := range []string{"/", "/setup", setupCallback + "?code=abc&state=def"} {
		code, page, _ := get(t, c, h.pub+path)
		if code != http.StatusNotImplemented || !strings.Contains(page, "pass --app-id, --private-key and --webhook-secret") ||
			!strings.Contains(page, "stores credentials only beside a SQLite file") || strings.Contains(page, "Register GitHub App") {
			t.Errorf("GET %s = %d, want 501 and what to do:\n%s", path, code, page)
		}
	}
	if !strings.Contains(h.logBuf.String(), "On PostgreSQL pass --app-id, --private-key and --webhook-secret") {
		t.Errorf("the start's log does not say what to do on PostgreSQL:\n%s", h.logBuf.String())
	}
	if _, err := os.Stat(CredentialsPath(dsn)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a file at the path made from the DSN, %s: %v", CredentialsPath(dsn), err)
	}
	if entries, _ := os.ReadDir(wd); len(entries) > 0 {
		t.Errorf("files left in the working folder: %v", entries)
	}
}

// The credentials file `make run` writes in the checkout
// (mergegate.db → mergegate.credentials.json) is one .gitignore lists, so
// an App's private key is not committed by accident.
func TestMakeRunCredentialsFileIsGitIgnored(t *testing.T) {
	name := CredentialsPath("mergegate.db")
	f, err := os.Open(filepath.Join("..", ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		p := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "/")
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		if ok, _ := filepath.Match(p, name); ok {
			return
		}
	}
	t.Fatalf(".gitignore lists no pattern matching %s, the file make run's set-up page writes in the checkout", name)
}
