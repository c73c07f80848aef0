package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/webhook"
)

// unitExecStart is deploy/mergegate.service's ExecStart, split in words.
func unitExecStart(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "mergegate.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatal("deploy/mergegate.service has no ExecStart")
	return nil
}

// envExample is deploy/mergegate.env.example's settings (the lines not
// commented out), as systemd's EnvironmentFile reads them.
func envExample(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "mergegate.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("mergegate.env.example: %q is not KEY=VALUE", line)
		}
		out[k] = v
	}
	return out
}

// listening runs cmd until its "mergegate listening" line, and returns that
// line's fields and the log so far; the process is killed when the test
// ends.
func listening(t *testing.T, cmd *exec.Cmd) (map[string]any, *testkit.SyncBuffer) {
	t.Helper()
	log := &testkit.SyncBuffer{}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready, done := make(chan map[string]any, 1), make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["message"] == "mergegate listening" {
				ready <- m
			}
		}
		cmd.Wait() //nolint:errcheck
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck
		<-done
		if t.Failed() {
			t.Logf("log:\n%s", log.String())
		}
	})
	select {
	case m := <-ready:
		return m, log
	case <-done:
		t.Fatalf("exited before listening:\n%s", log.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("did not start:\n%s", log.String())
	}
	return nil, nil
}

// Issue 30, hole 7: the unit's ExecStart passed --db, which beats
// MERGEGATE_DB: replicas set up from docs/operations.md each ran their own
// SQLite file. The unit's ExecStart, run as systemd runs it (the
// environment file's settings, its WorkingDirectory), takes every setting
// from the environment file, the database an operator put there included.
func TestUnitTakesEverySettingFromTheEnvironmentFile(t *testing.T) {
	args := unitExecStart(t)
	if len(args) != 2 || args[0] != "/usr/local/bin/mergegate" || args[1] != "serve" {
		t.Fatalf("ExecStart = %q, want /usr/local/bin/mergegate serve: a flag there beats the environment file", args)
	}
	state := t.TempDir() // /var/lib/mergegate: StateDirectory, WorkingDirectory
	env := testkit.CleanEnv()
	for k, v := range envExample(t) {
		v = strings.ReplaceAll(v, "/var/lib/mergegate", state)
		switch k {
		case "MERGEGATE_ADDR", "MERGEGATE_ADMIN_ADDR":
			v = "127.0.0.1:0" // free ports, on loopback as the example has them
		}
		env = append(env, k+"="+v)
	}
	// What an operator edits: another database (a PostgreSQL URL for
	// replicas; here another file), and a replica name.
	db := filepath.Join(state, "operators-choice.db")
	env = append(env, "MERGEGATE_DB="+db, "MERGEGATE_REPLICA=mg-test", "GITHUB_WEBHOOK_SECRET="+e2eSecret)
	cmd := exec.Command(binPath, args[1:]...)
	cmd.Env, cmd.Dir = env, state
	start, _ := listening(t, cmd)
	if start["db"] != db || start["replica"] != "mg-test" || !strings.HasPrefix(start["addr"].(string), "127.0.0.1:") {
		t.Errorf("start line = %v, want the database %s and replica mg-test from the environment", start, db)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the database the environment names: %v", err)
	}
}

// Issue 30, hole 7: a second `serve` on a SQLite file another process
// serves ran beside it. It is refused, naming the other process.
func TestSecondServeOnOneSQLiteFileIsRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "mergegate.db")
	startServer(t, db, "--replica", "the-first-one")
	// Without the lock it would serve: killed after 15 s, it fails.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "serve", "--db", db, "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--webhook-secret", e2eSecret)
	cmd.Env = testkit.CleanEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("second serve: %v, want exit 1\n%s", err, stderr.String())
	}
	host, _ := os.Hostname()
	for _, want := range []string{"is served by another mergegate", "pid ", "on host " + host, "(replica the-first-one)", "several replicas need PostgreSQL"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("refusal lacks %q:\n%s", want, stderr.String())
		}
	}
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Issue 30, hole 7: with proxy_read_timeout 30s, a delivery nginx sent to
// a stopped replica was not sent on before GitHub gave up (10 s). The
// shipped deploy/nginx-replicas.conf, in front of a replica stopped with
// SIGSTOP and one that runs, has every delivery answered 202 within 10 s.
// It runs where nginx is installed (.ci/run installs Debian's).
func TestNginxReplicasConfFailsOverWithinGitHubsTimeout(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx is not installed: deploy/nginx-replicas.conf is not exercised here (apt-get install nginx; .ci/run does)")
	}
	stopped := startServer(t, filepath.Join(t.TempDir(), "a.db"))
	live := startServer(t, filepath.Join(t.TempDir(), "b.db"))
	stopped.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { stopped.Signal(syscall.SIGCONT) })

	shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx-replicas.conf"))
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	hostPort := func(url string) string { return strings.TrimPrefix(url, "http://") }
	conf := string(shipped)
	conf = strings.ReplaceAll(conf, "mg-1.internal:8080", hostPort(stopped.Pub))
	conf = strings.ReplaceAll(conf, "mg-2.internal:8080", hostPort(live.Pub))
	conf = strings.ReplaceAll(conf, "mg-3.internal:8080", hostPort(live.Pub))
	// Plain HTTP on loopback: the TLS lines and the port-80 redirect go.
	conf = strings.Replace(conf, "listen 443 ssl;", fmt.Sprintf("listen 127.0.0.1:%d;", port), 1)
	conf = strings.Replace(conf, "listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", freePort(t)), 1)
	conf = regexp.MustCompile(`(?m)^.*(\[::\]|ssl_certificate|http2 on).*$`).ReplaceAllString(conf, "")
	if strings.Contains(conf, ".internal") || !strings.Contains(conf, "proxy_read_timeout") {
		t.Fatalf("the shipped file changed shape; this test's edits no longer apply:\n%s", conf)
	}
	dir := t.TempDir()
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // workers read the temporary folder, which is root's
	}
	main := fmt.Sprintf(`%s
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
%[3]s
}
`, user, dir, conf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", confPath, "-g", "daemon off;")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGQUIT) //nolint:errcheck
		cmd.Wait()                          //nolint:errcheck
		if t.Failed() {
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx:\n%s\n%s", out.String(), logs)
		}
	})
	testkit.Eventually(t, "nginx listening", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	body := []byte(`{"action":"opened","number":1,"pull_request":{"number":1,"state":"open","head":{"sha":"a1"},"base":{"ref":"main"}},"repository":{"full_name":"o/r"},"installation":{"id":1}}`)
	client := &http.Client{Timeout: 10 * time.Second} // GitHub's
	for i := range 6 {
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/webhook", port), bytes.NewReader(body))
		req.Host = "mergegate.example.com"
		webhook.SignDelivery(req.Header, e2eSecret, "pull_request", fmt.Sprintf("nginx-%d", i), body)
		began := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("delivery %d through nginx: %v (after %s)", i, err, time.Since(began))
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Errorf("delivery %d through nginx: %d after %s, want 202", i, resp.StatusCode, time.Since(began))
		}
		t.Logf("delivery %d: %d in %s", i, resp.StatusCode, time.Since(began).Round(time.Millisecond))
	}
}
