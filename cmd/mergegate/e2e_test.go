package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/migrations"
)

// binPath is the mergegate binary built once for the end-to-end tests.
var binPath string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, ".", &binPath) }

const e2eSecret = "e2e-secret"

// startServer runs `mergegate serve` on db, with extra flags, until the
// test ends.
func startServer(t *testing.T, db string, extra ...string) *testkit.Server {
	t.Helper()
	return testkit.StartServer(t, binPath, append([]string{"--db", db, "--webhook-secret", e2eSecret}, extra...)...)
}

type resp struct {
	code int
	body map[string]any
	raw  string
}

func call(t *testing.T, method, url, token string, body any) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	raw, _ := io.ReadAll(r.Body)
	out := resp{code: r.StatusCode, raw: string(raw)}
	json.Unmarshal(raw, &out.body) //nolint:errcheck
	return out
}

func TestBinaryAdminAPI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	s := startServer(t, db)
	ev := func(action string, pr int, d map[string]any) map[string]any {
		return map[string]any{"eventType": "pull_request", "tenant": "7", "repo": "octo/app", "action": action, "prNumber": pr, "details": d}
	}
	steps := []struct {
		method, path string
		body         any
		code         int
		want         string // substring of the answer
	}{
		{"GET", "/healthz", nil, 200, `"ok"`},
		{"POST", "/event", ev("opened", 1, map[string]any{"sha": "abc"}), 200, `"result": "joined"`},
		{"POST", "/event", ev("opened", 1, map[string]any{"sha": "abc"}), 200, `"result": "already_queued"`},
		{"POST", "/event", ev("closed", 99, nil), 200, `"result": "left"`},
		{"POST", "/event", map[string]any{"eventType": "status", "tenant": "7", "repo": "octo/app", "action": "success", "details": map[string]any{"sha": "abc", "gateResult": "success"}}, 200, `"gate_recorded"`},
		{"POST", "/event", `{"eventType":"pull_request","tenant":"7"}`, 400, `"field": "repo"`},
		{"POST", "/event", `{"eventType":"pull_request","tenant":"7","repo":"octo/app","prNumber":"one"}`, 400, `"field": "prNumber"`},
		{"POST", "/event", `{not json`, 400, `"field": "body"`},
		{"POST", "/lease/acquire", map[string]string{"tenant": "7", "repo": "octo/app"}, 200, `"acquired": true`},
		{"GET", "/lease?tenant=7&repo=octo/app", nil, 200, `"held_by": "admin"`},
		{"POST", "/lease/acquire", map[string]string{"tenant": "7", "repo": "octo/app"}, 409, `"error": "locked"`},
		{"POST", "/event", ev("opened", 2, map[string]any{"sha": "def"}), 409, `"held_by": "admin"`},
		{"POST", "/reconcile", map[string]string{"tenant": "7", "repo": "octo/app"}, 409, `"locked"`},
		{"POST", "/lease/release", map[string]string{"tenant": "7", "repo": "octo/app"}, 200, `"released": true`},
		{"GET", "/lease?tenant=7&repo=octo/app", nil, 200, `"locked": false`},
		{"POST", "/reconcile", map[string]string{"tenant": "7", "repo": "octo/app"}, 200, `"queueLength": 1`},
		// A posted gate result only asks for a reading; without GitHub
		// nothing reads, so nothing passes.
		{"GET", "/queue?tenant=7&repo=octo/app", nil, 200, `"status": "queued"`},
		{"GET", "/queue?tenant=7", nil, 400, `"field": "repo"`},
		{"GET", "/metrics", nil, 200, ""},
	}
	for i, st := range steps {
		r := call(t, st.method, s.Admin+st.path, "", st.body)
		// The engine takes the lease for a moment after a release (it
		// drains the repository's inbox): a 409 then is the lease protocol's answer
		// to a busy repository, and the caller tries again.
		for try := 0; r.code == 409 && st.code != 409 && try < 100; try++ {
			time.Sleep(10 * time.Millisecond)
			r = call(t, st.method, s.Admin+st.path, "", st.body)
		}
		if r.code != st.code || !strings.Contains(r.raw, st.want) {
			t.Fatalf("step %d %s %s: %d %s\nwant %d containing %q", i, st.method, st.path, r.code, r.raw, st.code, st.want)
		}
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d", code)
	}
	// The database was closed cleanly and keeps the queue.
	s2 := startServer(t, db)
	r := call(t, "GET", s2.Admin+"/queue?tenant=7&repo=octo/app", "", nil)
	if q := r.body["queue"].([]any); len(q) != 1 {
		t.Fatalf("queue after restart: %s", r.raw)
	}
}

func TestBinaryAdminToken(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	s := startServer(t, db, "--admin-token", "s3cret")
	if r := call(t, "GET", s.Admin+"/queue?tenant=1&repo=a/b", "", nil); r.code != 401 {
		t.Fatalf("no token: %d", r.code)
	}
	if r := call(t, "GET", s.Admin+"/queue?tenant=1&repo=a/b", "wrong", nil); r.code != 401 {
		t.Fatalf("wrong token: %d", r.code)
	}
	if r := call(t, "GET", s.Admin+"/queue?tenant=1&repo=a/b", "s3cret", nil); r.code != 200 {
		t.Fatalf("right token: %d %s", r.code, r.raw)
	}
	// The dashboard takes the token as the basic-auth password.
	req, _ := http.NewRequest("GET", s.Admin+"/healthz", nil)
	req.SetBasicAuth("admin", "s3cret")
	r, err := http.DefaultClient.Do(req)
	if err != nil || r.StatusCode != 200 {
		t.Fatalf("basic auth: %v %v", r, err)
	}
	r.Body.Close()
	if strings.Contains(s.Log(), "s3cret") {
		t.Fatal("the admin token was logged")
	}
}

func TestBinaryRefusesOpenAdminWithoutToken(t *testing.T) {
	cmd := exec.Command(binPath, "serve", "--addr", "127.0.0.1:0", "--admin-addr", "0.0.0.0:0", "--db", filepath.Join(t.TempDir(), "m.db"))
	cmd.Env = testkit.CleanEnv()
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("serve started on a non-loopback admin address without a token")
	}
	if !strings.Contains(string(out), "admin-token") || !strings.Contains(string(out), "loopback") {
		t.Fatalf("the refusal does not say why: %s", out)
	}
}

func TestBinaryCommands(t *testing.T) {
	run := func(args ...string) (string, int) {
		cmd := exec.Command(binPath, args...)
		cmd.Env = testkit.CleanEnv()
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := run("version"); code != 0 || !strings.Contains(out, fmt.Sprintf("schema version %d", migrations.Latest())) {
		t.Fatalf("version: %d %s", code, out)
	}
	if out, code := run("help"); code != 0 || !strings.Contains(out, "serve") || !strings.Contains(out, "replay") || !strings.Contains(out, "migrate") {
		t.Fatalf("help: %d %s", code, out)
	}
	if out, code := run("help", "serve"); code != 0 || !strings.Contains(out, "MERGEGATE_ADMIN_ADDR") {
		t.Fatalf("help serve: %d %s", code, out)
	}
	db := filepath.Join(t.TempDir(), "m.db")
	if out, code := run("migrate", "--db", db); code != 1 || !strings.Contains(out, "does not exist") {
		t.Fatalf("migrate of a missing file: %d %s", code, out)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil { // an empty file: an empty database
		t.Fatal(err)
	}
	if out, code := run("migrate", "--db", db); code != 0 || !strings.Contains(out, fmt.Sprintf("0 -> %d", migrations.Latest())) {
		t.Fatalf("migrate: %d %s", code, out)
	}
	if out, code := run("migrate", "--db", db); code != 0 || !strings.Contains(out, fmt.Sprintf("%d -> %d", migrations.Latest(), migrations.Latest())) {
		t.Fatalf("migrate again: %d %s", code, out)
	}
	if out, code := run("bogus"); code != 2 || !strings.Contains(out, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, out)
	}
	if out, code := run("serve", "--merge-method", "yolo", "--db", db); code != 2 || !strings.Contains(out, "merge-method") {
		t.Fatalf("bad flag value: %d %s", code, out)
	}
	if out, code := run("reconcile", "--admin-addr", closedAddr(t), "--db", db, "--tenant", "1", "--repo", "a/b"); code != 0 || !strings.Contains(out, `"staleLeases": []`) {
		t.Fatalf("reconcile: %d %s", code, out)
	}
}
