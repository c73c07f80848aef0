package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clearEnv unsets the environment variables of every serve setting for
// the test (CI runners set some, e.g. GITHUB_API_URL).
func clearEnv(t *testing.T) {
	t.Helper()
	for _, s := range serveSettings {
		if s.env == "" {
			continue
		}
		t.Setenv(s.env, "") // restores the original value after the test
		os.Unsetenv(s.env)
	}
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mergegate.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func parse(t *testing.T, args ...string) (values, error) {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return parseSettings(fs, serveSettings, args)
}

func TestConfigPrecedenceFlagEnvFileDefault(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, `
addr: ":7001"
admin-addr: "127.0.0.1:7002"
db: /from/file.db
merge-method: rebase
`)
	t.Setenv("MERGEGATE_ADMIN_ADDR", "127.0.0.1:8002") // env beats the file
	t.Setenv("MERGEGATE_DB", "/from/env.db")           // env, beaten by the flag
	v, err := parse(t, "--config", file, "--db", "/from/flag.db")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"db":              "/from/flag.db",  // flag > env > file
		"admin-addr":      "127.0.0.1:8002", // env > file
		"addr":            ":7001",          // file > default
		"merge-method":    "rebase",         // file > default
		"reconcile-every": "5m",             // default
		"lease-ttl":       "30s",            // default
	} {
		if v[key] != want {
			t.Errorf("%s = %q, want %q", key, v[key], want)
		}
	}
}

func TestConfigFileFromEnvironment(t *testing.T) {
	clearEnv(t)
	t.Setenv("MERGEGATE_CONFIG", writeConfig(t, "trigger-label: merge-me\n"))
	v, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if v["trigger-label"] != "merge-me" {
		t.Fatalf("trigger-label = %q", v["trigger-label"])
	}
	// The flag names another file: it wins over MERGEGATE_CONFIG.
	v, err = parse(t, "--config", writeConfig(t, "trigger-label: other\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v["trigger-label"] != "other" {
		t.Fatalf("trigger-label = %q with --config", v["trigger-label"])
	}
}

func TestConfigFileEmptyValueAndTypes(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, `
trigger-label: ""
auto-merge-trigger: false
app-id: 12345
private-key: /etc/mergegate/app.pem
reconcile-every: 10m
lease-ttl: 20s
lease-dead: 60s
`)
	v, err := parse(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.appConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.TriggerLabel != "" || c.AutoMerge || c.AppID != 12345 || c.ReconcileEvery != 10*time.Minute ||
		c.LeaseTTL != 20*time.Second || c.LeaseDead != time.Minute || c.PrivateKeyPath != "/etc/mergegate/app.pem" {
		t.Fatalf("config = %+v", c)
	}
	// An empty environment variable is set: it beats the file.
	t.Setenv("MERGEGATE_TRIGGER_LABEL", "env-label")
	t.Setenv("MERGEGATE_RECONCILE_EVERY", "")
	v, err = parse(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	if v["trigger-label"] != "env-label" || v["reconcile-every"] != "" {
		t.Fatalf("trigger-label %q, reconcile-every %q", v["trigger-label"], v["reconcile-every"])
	}
}

// A file named *.toml is TOML, with the same keys and the same rules.
func TestConfigFileInTOML(t *testing.T) {
	clearEnv(t)
	p := filepath.Join(t.TempDir(), "mergegate.toml")
	body := "addr = \":7001\"\napp-id = 12345\nprivate-key = \"/etc/mergegate/app.pem\"\nlease-ttl = \"20s\"\nauto-merge-trigger = true\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := parse(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.appConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":7001" || c.AppID != 12345 || c.LeaseTTL != 20*time.Second || !c.AutoMerge {
		t.Fatalf("config = %+v", c)
	}
	for body, want := range map[string]string{
		"merge-methd = \"squash\"\n":        "unknown keys merge-methd",
		"webhook-secret = [\"a\", \"b\"]\n": "single value",
		"addr = \":7001\n":                  "--config " + p,
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := parse(t, "--config", p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", body, err, want)
		}
	}
}

func TestConfigFileRefusesUnknownKeys(t *testing.T) {
	clearEnv(t)
	for name, body := range map[string]string{
		"a typo":        "admin_addr: 127.0.0.1:9\nmerge-methd: squash\n",
		"config itself": "config: /etc/other.yml\n",
	} {
		_, err := parse(t, "--config", writeConfig(t, body))
		if err == nil || !strings.Contains(err.Error(), "unknown keys") {
			t.Errorf("%s: err = %v, want unknown keys", name, err)
		}
	}
	_, err := parse(t, "--config", writeConfig(t, "admin_addr: x\nmerge-methd: y\n"))
	if err == nil || !strings.Contains(err.Error(), "admin_addr, merge-methd") {
		t.Errorf("the error should name every unknown key: %v", err)
	}
	if _, err := parse(t, "--config", writeConfig(t, "addr: [unclosed\n")); err == nil {
		t.Error("malformed YAML accepted")
	}
	for _, body := range []string{"webhook-secret: [a, b]\n", "addr:\n  host: x\n"} {
		if _, err := parse(t, "--config", writeConfig(t, body)); err == nil || !strings.Contains(err.Error(), "single value") {
			t.Errorf("%q: err = %v, want a refusal of a list or map value", body, err)
		}
	}
	if _, err := parse(t, "--config", filepath.Join(t.TempDir(), "missing.yml")); err == nil {
		t.Error("a missing config file accepted")
	}
}

// The examples in deploy/ use only keys and variables that exist.
func TestDeployExamplesAreValid(t *testing.T) {
	clearEnv(t)
	v, err := parse(t, "--config", filepath.Join("..", "..", "deploy", "mergegate.example.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.appConfig(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "mergegate.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, s := range serveSettings {
		known[s.env] = true
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		name, _, ok := strings.Cut(line, "=")
		if !ok || strings.ContainsAny(name, " :") {
			continue // prose
		}
		if !known[name] {
			t.Errorf("deploy/mergegate.env.example sets %s, which no flag reads", name)
		}
	}
}

// A bad value's error names what held it: the flag when it was given on
// the command line, else the environment variable or the config file's key
// the user has to go and fix.
func TestConfigErrorsNameTheSourceOfTheBadValue(t *testing.T) {
	clearEnv(t)
	file := writeConfig(t, "lease-ttl: soon\n")
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    []string
		notWant string
	}{
		{"flag", nil, []string{"--lease-ttl", "soon"}, []string{`--lease-ttl "soon"`}, "was set by"},
		{"environment", map[string]string{"MERGEGATE_LEASE_TTL": "soon"}, nil,
			[]string{`--lease-ttl "soon"`, "--lease-ttl was set by MERGEGATE_LEASE_TTL"}, ""},
		{"config file", nil, []string{"--config", file},
			[]string{`--lease-ttl "soon"`, "--lease-ttl was set by key lease-ttl in the config file " + file}, ""},
		{"validation, environment", map[string]string{"MERGEGATE_MERGE_METHOD": "fast-forward"}, nil,
			[]string{`--merge-method "fast-forward"`, "--merge-method was set by MERGEGATE_MERGE_METHOD"}, ""},
		{"bool, environment", map[string]string{"MERGEGATE_AUTO_MERGE_TRIGGER": "perhaps"}, nil,
			[]string{"--auto-merge-trigger was set by MERGEGATE_AUTO_MERGE_TRIGGER"}, ""},
		{"two settings, one from the environment", map[string]string{"GITHUB_APP_ID": "12"}, nil,
			[]string{"--app-id and --private-key go together", "--app-id was set by GITHUB_APP_ID"}, "--private-key was set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, val := range c.env {
				t.Setenv(k, val)
			}
			v, err := parse(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.appConfig()
			if err == nil {
				t.Fatal("a bad value accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c.notWant != "" && strings.Contains(err.Error(), c.notWant) {
				t.Errorf("error %q says %q", err, c.notWant)
			}
		})
	}
}

// The logger's settings are named the same way, through serve itself.
func TestServeLogLevelErrorNamesTheVariable(t *testing.T) {
	clearEnv(t)
	t.Setenv("MERGEGATE_LOG_LEVEL", "loud")
	t.Setenv("MERGEGATE_DB", filepath.Join(t.TempDir(), "m.db"))
	var stderr strings.Builder
	code := run([]string{"serve"}, io.Discard, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--log-level was set by MERGEGATE_LOG_LEVEL") {
		t.Fatalf("exit %d, stderr %q: want 2 and the variable named", code, stderr.String())
	}
}
