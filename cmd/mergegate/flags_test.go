package main

import (
	"bytes"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// commandNames are the commands of the usage text.
func commandNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  mergegate ") && len(f) > 1 {
			names = append(names, f[1])
		}
	}
	return names
}

// The help writes every flag --name, as the docs and the errors do.
func TestHelpWritesFlagsWithTwoDashes(t *testing.T) {
	clearEnv(t)
	single := regexp.MustCompile(`(?m)^  -[a-z]`)
	for _, name := range commandNames(t) {
		var out bytes.Buffer
		run([]string{"help", name}, &out, &out)
		if m := single.FindString(out.String()); m != "" {
			t.Errorf("help %s writes a flag with one dash:\n%s", name, out.String())
		}
	}
}

// Each command lists the flags it reads, not serve's: reconcile starts no
// listener and prunes nothing; migrate reads only the database's.
func TestSubcommandsListOnlyTheirOwnFlags(t *testing.T) {
	clearEnv(t)
	help := func(name string) string {
		var out bytes.Buffer
		run([]string{"help", name}, &out, &out)
		return out.String()
	}
	flags := regexp.MustCompile(`(?m)^  --([a-z-]+)`)
	listed := func(name string) map[string]bool {
		m := map[string]bool{}
		for _, f := range flags.FindAllStringSubmatch(help(name), -1) {
			m[f[1]] = true
		}
		return m
	}
	rec := listed("reconcile")
	for _, f := range []string{"addr", "webhook-secret", "record", "retention", "body-retention", "redeliver-budget", "reconcile-every"} {
		if rec[f] {
			t.Errorf("help reconcile lists --%s, which a reconcile pass does not read", f)
		}
	}
	for _, f := range []string{"tenant", "repo", "admin-addr", "admin-token", "db", "app-id", "private-key", "merge-method"} {
		if !rec[f] {
			t.Errorf("help reconcile does not list --%s", f)
		}
	}
	if got := listed("migrate"); len(got) != 3 || !got["db"] || !got["sync"] || !got["config"] {
		t.Errorf("help migrate lists %v, want --db, --sync and --config", got)
	}
	for _, name := range []string{"backup", "export"} {
		if got := listed(name); got["sync"] || !got["db"] {
			t.Errorf("help %s lists %v: it only reads the database, so --db and no --sync", name, got)
		}
	}
	if got := listed("healthcheck"); len(got) != 2 || !got["addr"] || !got["config"] {
		t.Errorf("help healthcheck lists %v, want --addr and --config", got)
	}
}

// An unknown flag is one line, naming it and where the help is, exit 2,
// for every command.
func TestUnknownFlagIsOneLine(t *testing.T) {
	clearEnv(t)
	for _, name := range commandNames(t) {
		if name == "help" || name == "version" {
			continue
		}
		var out, errOut bytes.Buffer
		code := run([]string{name, "--nope"}, &out, &errOut)
		want := "mergegate " + name + ": unknown flag --nope (mergegate help " + name + " lists its flags)\n"
		if code != 2 || errOut.String() != want || out.Len() != 0 {
			t.Errorf("%s --nope: exit %d, stderr %q, stdout %q; want 2 and %q", name, code, errOut.String(), out.String(), want)
		}
	}
	var errOut bytes.Buffer
	if code := run([]string{"serv"}, &errOut, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("an unknown command: exit %d, %q; want 2 and one line", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--db"}, &errOut, &errOut); code != 2 || !strings.Contains(errOut.String(), "--db needs a value") {
		t.Errorf("a flag without its value: exit %d, %q", code, errOut.String())
	}
}

// Every bad value is refused at start (exit 2, nothing opened), naming the
// flag and what it accepts.
func TestBadValuesRefusedAtStartNamingTheFlag(t *testing.T) {
	clearEnv(t)
	db := filepath.Join(t.TempDir(), "never-created.db")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--sync", "sometimes"}, `--sync "sometimes": want normal or full`},
		{[]string{"migrate", "--sync", "FULL!"}, `--sync "FULL!": want normal or full`},
		{[]string{"serve", "--github-url", "api.github.com"}, `--github-url "api.github.com": want GitHub's REST base URL`},
		{[]string{"serve", "--github-url", "ftp://ghe.example.com/api/v3/"}, `--github-url "ftp://ghe.example.com/api/v3/": want`},
		{[]string{"serve", "--body-retention", "96h"}, `--body-retention 96h is longer than --retention 72h: want at most --retention`},
		{[]string{"serve", "--retention", "12h"}, `--body-retention 24h is longer than --retention 12h`},
		{[]string{"serve", "--lease-ttl", "-5s"}, `--lease-ttl "-5s": want a positive duration like 30s`},
		{[]string{"serve", "--reconcile-every", "0"}, `--reconcile-every "0": want a positive duration like 5m`},
		{[]string{"serve", "--retention", "forever"}, `--retention "forever": want a positive duration like 72h`},
		{[]string{"serve", "--check-timeout", "-1m"}, `--check-timeout "-1m": want a duration like 1h, or 0 to wait forever`},
		{[]string{"serve", "--log-level", "trace"}, `--log-level "trace": want debug, info, warn or error`},
		{[]string{"serve", "--log-format", "xml"}, `--log-format "xml": want json or console`},
		{[]string{"serve", "--addr", "8080"}, `--addr "8080": want HOST:PORT or :PORT, such as :8080`},
		{[]string{"serve", "--admin-addr", "localhost"}, `--admin-addr "localhost": want HOST:PORT or :PORT`},
		{[]string{"serve", "--redeliver-budget", "-1"}, `--redeliver-budget "-1": want a number, 0 to turn the sweep off`},
		{[]string{"serve", "--auto-merge-trigger=perhaps"}, `--auto-merge-trigger "perhaps": want true or false`},
		{[]string{"serve", "--app-id", "my-app"}, `--app-id "my-app": want the App's numeric id`},
		{[]string{"reconcile", "--tenant", "1", "--repo", "a/b", "--sync", "off"}, `--sync "off": want normal or full`},
		{[]string{"healthcheck", "--addr", "nope"}, `--addr "nope": want HOST:PORT`},
		{[]string{"replay", "--webhook-secret", "s", "--url", "localhost:8080/webhook", "."}, `--url "localhost:8080/webhook": want mergegate's webhook URL`},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(append(c.args, "--db", db), &out, &errOut)
		if c.args[0] == "healthcheck" || c.args[0] == "replay" {
			code = run(c.args, &out, &errOut)
		}
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
	// The case of a word is not a mistake (leasedo and zerolog read any).
	for _, args := range [][]string{{"--sync", "FULL"}, {"--log-level", "Debug"}} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		if _, err := parseSettings(fs, serveSettings, args); err != nil {
			t.Errorf("%v refused: %v", args, err)
		}
	}
	t.Setenv("MERGEGATE_SYNC", "always")
	var errOut bytes.Buffer
	if code := run([]string{"serve", "--db", db}, &errOut, &errOut); code != 2 || !strings.Contains(errOut.String(), "--sync was set by MERGEGATE_SYNC") {
		t.Errorf("a bad value from the environment: exit %d, %q", code, errOut.String())
	}
}
