package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

const scenarios = "../../testdata/scenarios"

// replayEnv pins the settings replay reads from the environment.
func replayEnv(t *testing.T) {
	t.Setenv("GITHUB_WEBHOOK_SECRET", "")
	t.Setenv("MERGEGATE_REPLAY_URL", "")
	os.Unsetenv("MERGEGATE_REPLAY_URL") // the default URL (t.Setenv restores the value after)
	t.Setenv("MERGEGATE_TRIGGER_LABEL", "automerge")
	t.Setenv("MERGEGATE_AUTO_MERGE_TRIGGER", "true")
	t.Setenv("MERGEGATE_MERGE_METHOD", "merge")
	t.Setenv("MERGEGATE_CONFIG", "")
}

func runReplay(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(append([]string{"replay"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func golden(t *testing.T, scenario string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(scenarios, scenario, "expected.golden"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReplayOfflinePrintsTheGoldenState(t *testing.T) {
	replayEnv(t)
	for _, args := range [][]string{
		{"--offline", filepath.Join(scenarios, "pr-behind-base")},
		{"-offline=true", "--strict", filepath.Join(scenarios, "pr-behind-base")},
	} {
		code, out, errs := runReplay(args...)
		if code != 0 || errs != "" {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		if want := golden(t, "pr-behind-base"); out != want {
			t.Fatalf("%v printed:\n%s\nwant expected.golden:\n%s", args, out, want)
		}
	}
	// The options of serve apply: squash instead of merge.
	code, out, _ := runReplay("--offline", "--merge-method", "squash", filepath.Join(scenarios, "happy-path"))
	if code != 0 || !strings.Contains(out, `"method": "squash"`) {
		t.Fatalf("--merge-method squash: exit %d\n%s", code, out)
	}
}

func TestReplayBadInput(t *testing.T) {
	replayEnv(t)
	dir := t.TempDir()
	src := filepath.Join(scenarios, "happy-path")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(src, e.Name()))
		os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644) //nolint:errcheck
	}
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("# what this is\n"), 0o644)                        //nolint:errcheck
	os.WriteFile(filepath.Join(dir, "000003-garbage.json"), []byte(`{"event": "push", "delivery":`), 0o644) //nolint:errcheck
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("nothing\n"), 0o644)                               //nolint:errcheck

	// Default: each bad file is named and skipped; the rest replays.
	code, out, errs := runReplay("--offline", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errs)
	}
	for _, name := range []string{"README.md", "000003-garbage.json", "notes.txt"} {
		if !strings.Contains(errs, "skipped "+filepath.Join(dir, name)+": not a recorded delivery") {
			t.Errorf("stderr does not name %s:\n%s", name, errs)
		}
	}
	if out != golden(t, "happy-path") {
		t.Fatalf("the good deliveries did not replay as happy-path:\n%s", out)
	}

	// --strict: the first bad file stops the run, named, exit 1.
	code, out, errs = runReplay("--offline", "--strict", dir)
	if code != 1 || out != "" || !strings.Contains(errs, filepath.Join(dir, "000003-garbage.json")+": not a recorded delivery") {
		t.Fatalf("--strict: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "name at least one recorded delivery"},
		{[]string{"--offline", filepath.Join(dir, "missing")}, 1, "no such file"},
		{[]string{"--offline", "--merge-method", "octopus", dir}, 2, "--merge-method"},
		{[]string{"--strict=maybe", dir}, 2, `--strict "maybe": want true or false`},
		{[]string{"--webhook-secret", "s", "--delay", "soon", dir}, 2, "--delay"},
		{[]string{dir}, 2, "--webhook-secret"},
		{[]string{"--offline", filepath.Join(dir, "README.md")}, 0, "README.md: not a recorded delivery: not a .json file"},
	} {
		code, _, errs := runReplay(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// startApp runs the real App in-process (no GitHub credentials: deliveries
// are stored and applied, gates wait).
func startApp(t *testing.T, secret, record string) (*app.App, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := app.New(context.Background(), app.Config{
		Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DB: filepath.Join(dir, "m.db"), WebhookSecret: secret,
		ReconcileEvery: time.Hour, LeaseTTL: 30 * time.Second, LeaseDead: 90 * time.Second,
		TriggerLabel: "automerge", AutoMerge: true, MergeMethod: "merge", RecordDir: record,
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		a.Shutdown(ctx) //nolint:errcheck
	})
	pub, _ := a.Addrs()
	return a, "http://" + pub + "/webhook"
}

func TestReplayOnlineReportsEachStatus(t *testing.T) {
	replayEnv(t)
	a, url := startApp(t, "s3cret,older", "")
	dup := filepath.Join(scenarios, "duplicate-deliveries")

	start := time.Now()
	code, out, errs := runReplay("--url", url, "--webhook-secret", "s3cret", "--delay", "30ms", dup)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Fatalf("4 deliveries with --delay 30ms took %s", took)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "202 pull_request 00000008-0000-4000-8000-000000000001 ") ||
		!strings.HasPrefix(lines[3], "202 check_run 00000008-0000-4000-8000-000000000002 ") || lines[4] != "4 sent, 0 refused, 0 skipped" {
		t.Fatalf("output:\n%s", out)
	}
	// Stored once each (the redeliveries are recognised), then applied.
	k := leasedo.Key{Tenant: "1", Repo: "Codertocat/Hello-World"}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		done, err := a.Store.Deliveries(context.Background(), k, leasedo.DeliveryDone, 100)
		pending, err2 := a.Store.Deliveries(context.Background(), k, leasedo.DeliveryPending, 100)
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		if len(done) == 2 && len(pending) == 0 {
			break
		}
		if len(done)+len(pending) > 2 || time.Now().After(deadline) {
			t.Fatalf("deliveries done %d, pending %d; want the 2 distinct ones applied", len(done), len(pending))
		}
	}

	// A secret mergegate does not know: every delivery refused, exit 1.
	code, out, errs = runReplay("--url", url, "--webhook-secret", "wrong", "--as-fast-as-possible", dup)
	if code != 1 || !strings.Contains(out, "401 pull_request 00000008-0000-4000-8000-000000000001 ") ||
		!strings.Contains(out, "signature does not match") || !strings.Contains(out, "4 sent, 4 refused, 0 skipped") ||
		!strings.Contains(errs, "4 of 4 deliveries were refused") {
		t.Fatalf("wrong secret: exit %d\n%s%s", code, out, errs)
	}

	// The secret from the environment, the first of a list.
	t.Setenv("GITHUB_WEBHOOK_SECRET", "older,s3cret")
	if code, out, errs := runReplay("--url", url, "--as-fast-as-possible", filepath.Join(scenarios, "happy-path")); code != 0 {
		t.Fatalf("secret from the environment: exit %d\n%s%s", code, out, errs)
	}

	// Nobody listening: the run stops, naming the delivery.
	a.Shutdown(context.Background()) //nolint:errcheck
	code, _, errs = runReplay("--url", url, "--as-fast-as-possible", dup)
	if code != 1 || !strings.Contains(errs, "000001-pull_request-") {
		t.Fatalf("no server: exit %d, %s", code, errs)
	}
}

// The round trip with the real binary: serve --record, replay a scenario
// to it, replay the recorded folder offline: the scenario's golden state.
func TestBinaryRecordReplayRoundTrip(t *testing.T) {
	record := filepath.Join(t.TempDir(), "recorded")
	s := startServer(t, filepath.Join(t.TempDir(), "m.db"), "--record", record)
	scenario := filepath.Join(scenarios, "pr-behind-base")
	replay := func(args ...string) (string, string, int) {
		cmd := exec.Command(binPath, append([]string{"replay"}, args...)...)
		cmd.Env = testkit.CleanEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	out, errs, code := replay("--url", s.Pub+"/webhook", "--webhook-secret", e2eSecret, "--as-fast-as-possible", scenario)
	if code != 0 || !strings.Contains(out, "5 sent, 0 refused, 0 skipped") {
		t.Fatalf("online replay: exit %d\n%s%s", code, out, errs)
	}
	if s.Stop(t) != 0 {
		t.Fatalf("serve did not stop cleanly:\n%s", s.Log())
	}
	out, errs, code = replay("--offline", "--strict", record, filepath.Join(scenario, "scenario.json"))
	if code != 0 {
		t.Fatalf("offline replay of the recording: exit %d\n%s", code, errs)
	}
	if want := golden(t, "pr-behind-base"); out != want {
		t.Fatalf("offline replay of the recording:\n%s\nwant expected.golden:\n%s", out, want)
	}
}

// The round trip of `mergegate export` with the real binary: serve
// without --record, a scenario replayed to it, stop; export the
// repository's stored deliveries from the database and replay that folder
// offline: the scenario's golden state. An export never overwrites a
// folder, names what it wants, and says when nothing is kept.
func TestBinaryExportReplayRoundTrip(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	s := startServer(t, db)
	scenario := filepath.Join(scenarios, "pr-behind-base")
	bin := func(args ...string) (string, string, int) {
		cmd := exec.Command(binPath, args...)
		cmd.Env = testkit.CleanEnv()
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	out, errs, code := bin("replay", "--url", s.Pub+"/webhook", "--webhook-secret", e2eSecret, "--as-fast-as-possible", scenario)
	if code != 0 || !strings.Contains(out, "5 sent, 0 refused, 0 skipped") {
		t.Fatalf("online replay: exit %d\n%s%s", code, out, errs)
	}
	if s.Stop(t) != 0 {
		t.Fatalf("serve did not stop cleanly:\n%s", s.Log())
	}
	dir := filepath.Join(t.TempDir(), "exported")
	out, errs, code = bin("export", "--db", db, "--tenant", "1", "--repo", "Codertocat/Hello-World", "--out", dir)
	if code != 0 || !strings.Contains(out, "5 deliveries of 1:Codertocat/Hello-World written to "+dir) {
		t.Fatalf("export: exit %d\n%s%s", code, out, errs)
	}
	if !strings.Contains(errs, "export: 5 deliveries done in ") {
		t.Errorf("export's stderr has no progress: %q", errs)
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
		if bytes.Contains(b, []byte(e2eSecret)) || bytes.Contains(b, []byte("Signature")) {
			t.Fatalf("%s holds the secret or a signature:\n%s", f.Name(), b)
		}
	}
	out, errs, code = bin("replay", "--offline", "--strict", dir, filepath.Join(scenario, "scenario.json"))
	if code != 0 {
		t.Fatalf("offline replay of the export: exit %d\n%s", code, errs)
	}
	if want := golden(t, "pr-behind-base"); out != want {
		t.Fatalf("offline replay of the export:\n%s\nwant expected.golden:\n%s", out, want)
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--tenant", "1", "--repo", "Codertocat/Hello-World", "--out", dir}, 1, "holds files already"},
		{[]string{"--tenant", "1", "--repo", "octo/none", "--out", filepath.Join(t.TempDir(), "x")}, 1, "no delivery of 1:octo/none"},
		{[]string{"--tenant", "1", "--out", filepath.Join(t.TempDir(), "y")}, 2, "--tenant, --repo and --out are required"},
		{[]string{"--tenant", "1", "--repo", "a/b", "--since", "soon", "--out", filepath.Join(t.TempDir(), "z")}, 2, `--since "soon"`},
	} {
		_, errs, code := bin(append([]string{"export", "--db", db}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.says) {
			t.Errorf("export %v: exit %d, %q; want %d saying %q", c.args, code, errs, c.code, c.says)
		}
	}
}
