package webhook

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// FuzzVerify: Verify never panics, accepts what Sign produces and accepts
// nothing else (up to hex case).
func FuzzVerify(f *testing.F) {
	f.Add(vectorSecret, []byte(vectorBody), vectorSig)
	f.Add("s", []byte(minimal), "sha256=")
	f.Add("s", []byte{}, "sha1=0123456789abcdef0123456789abcdef01234567")
	f.Add("a,b", []byte("x"), "sha256="+strings.Repeat("G", 64))
	f.Fuzz(func(t *testing.T, secret string, body []byte, header string) {
		s, err := NewSecrets(secret)
		if err != nil {
			if secret != "" {
				t.Fatalf("NewSecrets(%q) = %v", secret, err)
			}
			return
		}
		good := Sign(secret, body)
		if err := Verify(s, body, good); err != nil {
			t.Fatalf("Verify(Sign) = %v", err)
		}
		if err := Verify(s, body, header); err == nil && !strings.EqualFold(header, good) {
			t.Fatalf("Verify accepted %q; the signature is %s", header, good)
		}
	})
}

// FuzzTranslate: Parse and Translate never panic on arbitrary bytes, refuse
// what is not a JSON object with an ErrMalformed, and what Translate
// produces is well formed.
func FuzzTranslate(f *testing.F) {
	for _, seed := range []struct{ event, file string }{
		{"pull_request", "pull_request/opened.payload.json"},
		{"pull_request", "pull_request/unlabeled.payload.json"},
		{"check_suite", "ghes-35/check_suite/completed.json"},
		{"status", "status/with-installation.payload.json"},
		{"push", "push/with-new-branch.payload.json"},
		{"installation_repositories", "installation_repositories/added.payload.json"},
	} {
		f.Add(seed.event, slimFixture(f, seed.file))
	}
	f.Add("pull_request", []byte(minimal))
	f.Add("pull_request", []byte(`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":null}}`))
	f.Add("check_run", []byte(`{"action":"completed","check_run":{"head_sha":"x","pull_requests":[{"number":-1}]}}`))
	f.Add("installation", []byte(`{"action":"created","installation":{"id":1e3}}`))
	f.Add("ping", []byte("\x00"))
	f.Add("", []byte("{}"))
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		meta, err := Parse(event, body)
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse err = %v, want an ErrMalformed", err)
		}
		object := json.Valid(body) && bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{"))
		if err == nil && !object {
			t.Fatalf("Parse(%q) accepted what is not a JSON object", body)
		}
		d := leasedo.Delivery{ID: "fuzz", Event: event, Body: body}
		if err == nil {
			d.Action, d.Tenant, d.Repo = meta.Action, meta.Tenant, meta.Repo
		}
		for _, opt := range []rules.Options{rules.DefaultOptions(), {}} {
			tr, err := Translate(d, opt)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("Translate err = %v, want an ErrMalformed", err)
				}
				continue
			}
			if !object {
				t.Fatalf("Translate(%q) accepted what is not a JSON object", body)
			}
			if tr.Ignored != "" && (len(tr.Events) > 0 || tr.Install != nil || tr.Push != nil) {
				t.Fatalf("ignored and acted on: %+v", tr)
			}
			for _, e := range tr.Events {
				if e.EventType != event || e.Tenant != d.Tenant || e.Repo != d.Repo || e.Details == nil || e.Details.GateResult != "" {
					t.Fatalf("bad event %+v", e)
				}
			}
		}
	})
}

// slimFixture keeps only the fields mergegate reads from an example, so that
// the fuzzer (whose minimizer crawls on 28 KB inputs) mutates what matters.
func slimFixture(f *testing.F, rel string) []byte {
	keep := func(m map[string]any, keys ...string) {
		for k := range m {
			if !slices.Contains(keys, k) {
				delete(m, k)
			}
		}
	}
	return editJSON(f, readFixture(f, rel), func(m map[string]any) {
		keep(m, "action", "installation", "repository", "pull_request", "label", "changes",
			"check_suite", "check_run", "sha", "state", "ref", "after", "deleted",
			"repositories", "repositories_added", "repositories_removed")
		for _, k := range []string{"installation", "repository", "check_suite", "check_run", "label"} {
			if o, ok := m[k].(map[string]any); ok {
				keep(o, "id", "full_name", "head_sha", "pull_requests", "name")
			}
		}
		if pr, ok := m["pull_request"].(map[string]any); ok {
			keep(pr, "number", "state", "draft", "labels", "auto_merge", "head", "base")
			for _, k := range []string{"head", "base"} {
				if o, ok := pr[k].(map[string]any); ok {
					keep(o, "sha", "ref")
				}
			}
		}
	})
}

// randomBody is n random bytes, like a compressed-looking payload.
func randomBody(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// FuzzFirstCommand: FirstCommand never panics, and what it finds is one of
// the commands mergegate knows or "invalid" with at most 200 bytes (plus
// "...") of the line; a body with no "@mergegate" has no command.
func FuzzFirstCommand(f *testing.F) {
	for _, s := range []string{"@mergegate queue", "> @mergegate cancel\n@mergegate priority high", "```\n@mergegate cancel\n```",
		"<!--\n@mergegate x\n-->\n@mergegate refresh", "    @mergegate queue", "@MERGEGATE priority LOW\r\n", strings.Repeat("@mergegate x ", 100)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, ok := FirstCommand(body)
		if !ok {
			if c != (Command{}) {
				t.Fatalf("no command but %+v", c)
			}
			return
		}
		if !strings.Contains(strings.ToLower(body), "@mergegate") {
			t.Fatalf("command %+v in %q", c, body)
		}
		switch c.Name {
		case "queue", "cancel", "refresh":
			if c.Arg != "" {
				t.Fatalf("%+v", c)
			}
		case "priority":
			if c.Arg != "high" && c.Arg != "normal" && c.Arg != "low" {
				t.Fatalf("%+v", c)
			}
		case "invalid":
			if len(c.Arg) > 203 {
				t.Fatalf("invalid command's line is %d bytes", len(c.Arg))
			}
		default:
			t.Fatalf("command %+v", c)
		}
	})
}
