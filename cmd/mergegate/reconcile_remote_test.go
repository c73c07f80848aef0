package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit"
)

// runReconcile runs `mergegate reconcile` and returns stdout, stderr and
// the exit code.
func runReconcile(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binPath, append([]string{"reconcile"}, args...)...)
	cmd.Env = testkit.CleanEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.Run() //nolint:errcheck // the exit code says
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// With a server running, `mergegate reconcile` has the server run the pass
// (so the server acts on the repaired queue) and never opens the database
// itself; the admin token is required as for any admin call.
func TestReconcileCommandReachesRunningServer(t *testing.T) {
	const token = "reconcile-token-0123456789"
	s := startServer(t, filepath.Join(t.TempDir(), "served.db"), "--admin-token", token, "--log-level", "debug")
	if r := call(t, "POST", s.Admin+"/event", token, map[string]any{"eventType": "pull_request", "tenant": "7", "repo": "octo/app",
		"action": "opened", "prNumber": 1, "details": map[string]any{"sha": "abc"}}); r.code != 200 {
		t.Fatalf("event: %d %s", r.code, r.raw)
	}
	adminAddr := strings.TrimPrefix(s.Admin, "http://")
	other := filepath.Join(t.TempDir(), "not-opened.db")

	out, errOut, code := runReconcile(t, "--admin-addr", adminAddr, "--admin-token", token, "--db", other, "--tenant", "7", "--repo", "octo/app")
	if code != 0 || !strings.Contains(out, `"queueLength": 1`) || !strings.Contains(out, `"staleLeases"`) {
		t.Fatalf("reconcile via the server: %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "the server at http://"+adminAddr+" ran the pass") {
		t.Fatalf("stderr does not say the server ran it: %s", errOut)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the command opened a database of its own beside the server: %v", err)
	}
	if !strings.Contains(s.Log(), `"reconcile pass"`) {
		t.Fatalf("the server's log shows no pass:\n%s", s.Log())
	}

	// A wrong or missing token: refused, and no fallback to the database.
	_, errOut, code = runReconcile(t, "--admin-addr", adminAddr, "--db", other, "--tenant", "7", "--repo", "octo/app")
	if code != 1 || !strings.Contains(errOut, "refused the admin token") {
		t.Fatalf("without the token: %d %s", code, errOut)
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatal("a refused token fell back to the database")
	}
	if strings.Contains(s.Log(), token) {
		t.Fatal("the admin token was logged")
	}

	// A lease held on the server: its 409, in the local command's words.
	if r := call(t, "POST", s.Admin+"/lease/acquire", token, map[string]string{"tenant": "7", "repo": "octo/app"}); r.code != 200 {
		t.Fatalf("acquire: %d %s", r.code, r.raw)
	}
	_, errOut, code = runReconcile(t, "--admin-addr", adminAddr, "--admin-token", token, "--db", other, "--tenant", "7", "--repo", "octo/app")
	if code != 1 || !strings.Contains(errOut, "is locked (held by admin)") {
		t.Fatalf("locked: %d %s", code, errOut)
	}
}

// With no server at the admin address, the pass runs on the database, and
// stderr says so.
func TestReconcileCommandWithoutServerUsesDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runReconcile(t, "--admin-addr", closedAddr(t), "--db", db, "--tenant", "1", "--repo", "a/b")
	if code != 0 || !strings.Contains(out, `"staleLeases": []`) {
		t.Fatalf("reconcile: %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "no server answers") || !strings.Contains(errOut, "directly") {
		t.Fatalf("stderr does not say the database was used: %s", errOut)
	}
	if fi, err := os.Stat(db); err != nil || fi.Size() == 0 {
		t.Fatalf("the database was not opened and migrated: %v", err)
	}
}

func TestAdminURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8081": "http://127.0.0.1:8081",
		":8081":          "http://127.0.0.1:8081",
		"0.0.0.0:9":      "http://127.0.0.1:9",
		"[::]:8081":      "http://[::1]:8081",
		"[::1]:8081":     "http://[::1]:8081",
		"localhost:8081": "http://localhost:8081",
		"127.0.0.1:0":    "",
		"nonsense":       "",
	} {
		got, ok := adminURL(addr)
		if got != want || ok != (want != "") {
			t.Errorf("adminURL(%q) = %q, %v; want %q", addr, got, ok, want)
		}
	}
}
