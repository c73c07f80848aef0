package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/forge"
)

// setting is one flag with its environment variable (README, Configuration).
type setting struct {
	name, env, def, usage string
}

var serveSettings = []setting{
	{"addr", "MERGEGATE_ADDR", ":8080", "public listener: /webhook, /healthz"},
	{"admin-addr", "MERGEGATE_ADMIN_ADDR", "127.0.0.1:8081", "admin listener: admin API, dashboard, /metrics, /healthz"},
	{"db", "MERGEGATE_DB", "mergegate.db", "SQLite file (created and migrated on start), or a PostgreSQL connection string (postgres://...)"},
	{"sync", "MERGEGATE_SYNC", "normal", "SQLite durability: normal (a power loss may lose the last commits) or full (fsync every commit)"},
	{"webhook-secret", "GITHUB_WEBHOOK_SECRET", "", "webhook secrets, comma-separated: any one verifies (rotation)"},
	{"app-id", "GITHUB_APP_ID", "", "GitHub App id"},
	{"private-key", "GITHUB_PRIVATE_KEY_PATH", "", "PEM file of the App's private key"},
	{"github-url", "GITHUB_API_URL", "https://api.github.com/", "GitHub REST base URL (GitHub Enterprise Server: https://HOST/api/v3/)"},
	{"admin-token", "MERGEGATE_ADMIN_TOKEN", "", "bearer token for the admin listener; required (at least 16 characters) unless it listens on loopback"},
	{"reconcile-every", "MERGEGATE_RECONCILE_EVERY", "5m", "cron period"},
	{"lease-ttl", "MERGEGATE_LEASE_TTL", "30s", "lease TTL (active -> stale)"},
	{"lease-dead", "MERGEGATE_LEASE_DEAD", "90s", "age at which the cron force-releases a lease (stale -> dead)"},
	{"trigger-label", "MERGEGATE_TRIGGER_LABEL", "automerge", "label that puts a PR in the queue; empty turns the label trigger off"},
	{"auto-merge-trigger", "MERGEGATE_AUTO_MERGE_TRIGGER", "true", "GitHub auto-merge puts a PR in the queue"},
	{"merge-method", "MERGEGATE_MERGE_METHOD", "merge", "merge, squash or rebase: used where the repository allows it, else the first method it allows"},
	{"check-timeout", "MERGEGATE_CHECK_TIMEOUT", "1h", "a queued PR whose required checks have not concluded this long after its push is bounced; 0 waits forever"},
	{"record", "MERGEGATE_RECORD", "", "write every delivery it stores into this folder, a redelivered id once (for replay)"},
	{"retention", "MERGEGATE_RETENTION", "72h", "how long processed deliveries are kept before they are pruned"},
	{"body-retention", "MERGEGATE_BODY_RETENTION", "24h", "how long the payloads of applied deliveries are kept (their rows, events and audit stay for --retention; at most --retention)"},
	{"redeliver-budget", "MERGEGATE_REDELIVER_BUDGET", strconv.Itoa(app.DefaultRedeliverBudget), "most redeliveries of failed webhook deliveries asked of GitHub per cron pass; 0 turns the sweep off"},
	{"writes-per-minute", "MERGEGATE_WRITES_PER_MINUTE", strconv.Itoa(forge.DefaultWritesPerMinute), "most content-generating GitHub requests (merges, check runs, comments, ...) per installation a minute, shared by the replicas (GitHub's secondary limit is 80); 0: no bound (GitHub Enterprise Server without secondary limits)"},
	{"writes-per-hour", "MERGEGATE_WRITES_PER_HOUR", strconv.Itoa(forge.DefaultWritesPerHour), "most content-generating GitHub requests per installation an hour, shared by the replicas (GitHub's secondary limit is 500); 0: no bound"},
	{"dashboard-url", "MERGEGATE_DASHBOARD_URL", "", "where people reach the dashboard (behind a proxy with its own login): each check run links its repository's page there"},
	{"replica", "MERGEGATE_REPLICA", "", "this process's name among several replicas on one PostgreSQL database: in leases (held_by), logs and GitHub's User-Agent (default HOST-PID)"},
	{"log-format", "MERGEGATE_LOG_FORMAT", "json", "json, or console for people"},
	{"log-level", "MERGEGATE_LOG_LEVEL", "info", "debug, info, warn or error"},
	{"config", "MERGEGATE_CONFIG", "", "YAML file (TOML if named *.toml) with the same keys as the flags; flags and environment win"},
}

// allSettings are every command's settings (a config file may hold any).
func allSettings() []setting {
	var out []setting
	for _, l := range [][]setting{serveSettings, reconcileSettings(), replaySettings, backupSettings(), exportSettings(), migrateStoreSettings()} {
		out = append(out, l...)
	}
	return out
}

// isBool: a setting whose default is true or false is a boolean flag:
// `--offline` alone means `--offline=true`.
func (s setting) isBool() bool { return s.def == "true" || s.def == "false" }

// boolString is a boolean flag that keeps its value as the string the
// other settings are resolved as.
type boolString struct{ v string }

func (b *boolString) String() string {
	if b == nil {
		return ""
	}
	return b.v
}

func (b *boolString) Set(s string) error {
	on, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	b.v = strconv.FormatBool(on)
	return nil
}

func (b *boolString) IsBoolFlag() bool { return true }

// values is a parsed command line: every setting resolved as flag, then
// environment, then config file, then default. Where each value came from
// is kept beside it under sourcePrefix+name (no setting's name has a
// colon), so that an error about a value can name what held it.
type values map[string]string

const sourcePrefix = "source:"

// source says where the value of setting name came from: "--name" for the
// command line and the default, the environment variable, or the config
// file's key.
func (v values) source(name string) string {
	if s := v[sourcePrefix+name]; s != "" {
		return s
	}
	return "--" + name
}

var flagInError = regexp.MustCompile(`--[a-z][a-z0-9-]*`)

// explain adds to err, for every setting it names by its --flag whose value
// came from the environment or the config file, where that value came
// from: the user set MERGEGATE_LEASE_TTL, not --lease-ttl, and looks there.
func (v values) explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var from []string
	seen := map[string]bool{}
	for _, f := range flagInError.FindAllString(msg, -1) {
		name := strings.TrimPrefix(f, "--")
		if seen[name] {
			continue
		}
		seen[name] = true
		if src := v.source(name); src != f {
			from = append(from, f+" was set by "+src)
		}
	}
	if len(from) == 0 {
		return err
	}
	return fmt.Errorf("%w (%s)", err, strings.Join(from, "; "))
}

// parseSettings defines list on fs, parses args and resolves each setting.
func parseSettings(fs *flag.FlagSet, list []setting, args []string) (values, error) {
	ptrs := map[string]*string{}
	for _, s := range list {
		usage := s.usage
		if s.env != "" {
			usage += " (env " + s.env + ")"
		}
		if s.isBool() {
			b := &boolString{v: s.def}
			fs.Var(b, s.name, usage)
			ptrs[s.name] = &b.v
			continue
		}
		ptrs[s.name] = fs.String(s.name, s.def, usage)
	}
	// The flag package prints its own error and the whole help on a bad
	// command line; mergegate says one line instead, with the flag as the
	// docs write it and where the help is (-h prints the help itself).
	output := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(output)
	if errors.Is(err, flag.ErrHelp) {
		fs.Usage()
		return nil, err
	}
	if err != nil {
		return nil, usageError{flagError(fs.Name(), err)}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	env := func(s setting) (string, bool) {
		if s.env == "" {
			return "", false
		}
		return os.LookupEnv(s.env)
	}
	// The config file's own location: flag, then environment.
	var file map[string]string
	var configPath string
	for _, s := range list {
		if s.name != "config" {
			continue
		}
		path := *ptrs["config"]
		if !set["config"] {
			if v, ok := env(s); ok {
				path = v
			}
		}
		if path != "" {
			configPath = path
			var err error
			if file, err = readConfigFile(path, list); err != nil {
				return nil, err
			}
		}
	}
	out := values{}
	for _, s := range list {
		v := *ptrs[s.name]
		if !set[s.name] {
			if ev, ok := env(s); ok {
				v = ev
				out[sourcePrefix+s.name] = s.env
			} else if fv, ok := file[s.name]; ok {
				v = fv
				out[sourcePrefix+s.name] = "key " + s.name + " in the config file " + configPath
			}
		}
		out[s.name] = v
		rememberDSN(v) // a PostgreSQL connection string's password never printed (redact.go)
	}
	for _, s := range list {
		if check := checks[s.name]; check != nil {
			if err := check(out[s.name]); err != nil {
				return nil, usageError{out.explain(fmt.Errorf("--%s %q: %w", s.name, out[s.name], err))}
			}
		}
	}
	return out, nil
}

// checks are the values that can be judged alone, checked as soon as the
// command line is read by every command that has the setting; the
// values that depend on others are checked by appConfig. Each error says
// what is accepted.
var checks = map[string]func(string) error{
	"sync": func(s string) error {
		if s := strings.ToLower(s); s != "normal" && s != "full" {
			return errors.New("want normal or full")
		}
		return nil
	},
	"log-level": func(s string) error {
		switch strings.ToLower(s) {
		case "debug", "info", "warn", "error":
			return nil
		}
		return errors.New("want debug, info, warn or error")
	},
	"log-format": func(s string) error {
		if s != "json" && s != "console" {
			return errors.New("want json or console")
		}
		return nil
	},
	"github-url": func(s string) error {
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return errors.New("want GitHub's REST base URL: https://api.github.com/, or https://HOST/api/v3/ for GitHub Enterprise Server")
		}
		return nil
	},
	"addr":       hostPort(":8080"),
	"admin-addr": hostPort("127.0.0.1:8081"),
}

func hostPort(example string) func(string) error {
	return func(s string) error {
		if _, port, err := net.SplitHostPort(s); err != nil || port == "" {
			return fmt.Errorf("want HOST:PORT or :PORT, such as %s", example)
		}
		return nil
	}
}

// flagError rewrites the flag package's parse errors ("flag provided but
// not defined: -x") as mergegate says them, with --flag and where the
// command's help is.
func flagError(cmd string, err error) error {
	msg := err.Error()
	var m []string
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		msg = "unknown flag --" + strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
	case strings.HasPrefix(msg, "flag needs an argument: "):
		msg = "--" + strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-") + " needs a value"
	default:
		if m = flagValueError.FindStringSubmatch(msg); m != nil {
			msg = "--" + m[2] + " " + m[1] + ": " + m[3]
		}
	}
	return fmt.Errorf("%s (mergegate help %s lists its flags)", msg, cmd)
}

var flagValueError = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([a-z0-9-]+): (.*)$`)

// readConfigFile reads a map whose keys are flag names: TOML when the
// file's name ends in .toml, else YAML.
func readConfigFile(path string, list []setting) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var raw map[string]any
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		err = toml.Unmarshal(b, &raw)
	} else {
		err = yaml.Unmarshal(b, &raw)
	}
	if err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	// One config file may serve every command: a key of another
	// command's flag is left for that command; a key no command has is
	// refused (a typo would silently do nothing).
	known := map[string]bool{}
	for _, s := range append(allSettings(), list...) {
		known[s.name] = true
	}
	mine := map[string]bool{}
	for _, s := range list {
		mine[s.name] = true
	}
	out := map[string]string{}
	var unknown []string
	for k, v := range raw {
		if !known[k] || k == "config" {
			unknown = append(unknown, k)
			continue
		}
		if !mine[k] {
			continue
		}
		switch v.(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("--config %s: %s: want a single value, not a list or a map", path, k)
		case nil:
			out[k] = ""
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("--config %s: unknown keys %s (keys are the flag names, e.g. admin-addr)", path, strings.Join(unknown, ", "))
	}
	return out, nil
}

// appConfig converts resolved settings into app.Config. An error names the
// bad value's flag, and the variable or config key that held it.
func (v values) appConfig() (app.Config, error) {
	c, err := v.parseAppConfig()
	return c, v.explain(err)
}

func (v values) parseAppConfig() (app.Config, error) {
	c := app.Config{
		Addr: v["addr"], AdminAddr: v["admin-addr"], DB: v["db"], Sync: v["sync"],
		WebhookSecret: v["webhook-secret"], PrivateKeyPath: v["private-key"], GitHubURL: v["github-url"],
		AdminToken: v["admin-token"], TriggerLabel: v["trigger-label"], MergeMethod: v["merge-method"],
		RecordDir: v["record"], Replica: v["replica"],
	}
	var err error
	dur := func(name, example string) time.Duration {
		if err != nil {
			return 0
		}
		d, e := time.ParseDuration(v[name])
		if e != nil || d <= 0 {
			err = fmt.Errorf("--%s %q: want a positive duration like %s", name, v[name], example)
		}
		return d
	}
	c.ReconcileEvery = dur("reconcile-every", "5m")
	c.LeaseTTL = dur("lease-ttl", "30s")
	c.LeaseDead = dur("lease-dead", "90s")
	c.Retention = dur("retention", "72h")
	c.BodyRetention = dur("body-retention", "24h")
	if err == nil && c.BodyRetention > c.Retention {
		err = fmt.Errorf("--body-retention %s is longer than --retention %s: want at most --retention (a delivery's row, which holds its payload, is pruned after --retention)", v["body-retention"], v["retention"])
	}
	if err == nil {
		d, e := time.ParseDuration(v["check-timeout"])
		switch {
		case e != nil || d < 0:
			err = fmt.Errorf("--check-timeout %q: want a duration like 1h, or 0 to wait forever", v["check-timeout"])
		case d == 0:
			c.CheckTimeout = -1 // 0 on the command line: never (0 in Config is the default)
		default:
			c.CheckTimeout = d
		}
	}
	if err != nil {
		return c, err
	}
	if s := v["app-id"]; s != "" {
		if c.AppID, err = strconv.ParseInt(s, 10, 64); err != nil || c.AppID <= 0 {
			return c, fmt.Errorf("--app-id %q: want the App's numeric id", s)
		}
	}
	if c.RedeliverBudget, err = strconv.Atoi(v["redeliver-budget"]); err != nil || c.RedeliverBudget < 0 {
		return c, fmt.Errorf("--redeliver-budget %q: want a number, 0 to turn the sweep off", v["redeliver-budget"])
	}
	for _, w := range []struct {
		key string
		to  *int
	}{{"writes-per-minute", &c.WritesPerMinute}, {"writes-per-hour", &c.WritesPerHour}} {
		n, err := strconv.Atoi(v[w.key])
		if err != nil || n < 0 {
			return c, fmt.Errorf("--%s %q: want a number of writes, 0 for no bound", w.key, v[w.key])
		}
		*w.to = n
		if n == 0 {
			*w.to = -1 // 0 on the command line: no bound (0 in Config is the default)
		}
	}
	c.DashboardURL = v["dashboard-url"]
	if c.AutoMerge, err = strconv.ParseBool(v["auto-merge-trigger"]); err != nil {
		return c, fmt.Errorf("--auto-merge-trigger %q: want true or false", v["auto-merge-trigger"])
	}
	return c, c.Validate()
}
