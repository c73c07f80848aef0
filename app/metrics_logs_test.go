package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// secretsIn reports every secret found in log.
func secretsIn(log string, secrets map[string]string) []string {
	var found []string
	for what, s := range secrets {
		if s != "" && strings.Contains(log, s) {
			found = append(found, what)
		}
	}
	return found
}

// pemSecrets are the lines of a PEM key's body: any one in a log is a leak.
func pemSecrets(pem []byte) map[string]string {
	out := map[string]string{"PEM header": "PRIVATE KEY-----"}
	for i, line := range strings.Split(string(pem), "\n") {
		if len(line) >= 32 && !strings.HasPrefix(line, "-----") {
			out["PEM line "+string(rune('0'+i%10))+line[:4]] = line
		}
	}
	return out
}

var installationToken = regexp.MustCompile(`gh[sopu]_[A-Za-z0-9]{16,}`)

// TestLogsCarryNoSecret runs a full scenario through the real App (merge,
// bounce with comment and label removal, admin calls with the token and
// without, a forged delivery) and greps the log for the webhook secret,
// the App's key, installation tokens and the admin token.
func TestLogsCarryNoSecret(t *testing.T) {
	const adminToken = "admin-token-0123456789abcdef"
	h := newHarness(t, func(c *Config) { c.AdminToken = adminToken })
	h.gh.SetRequired(testRepo, testBase, []string{"ci/build"}, false)
	h.label(7, shaA)
	h.pass(shaA)
	h.eventually("the merge", func() bool { return len(h.merges()) == 1 })
	h.gh.SetCheckRun(testRepo, shaC, "ci/build", "completed", "failure")
	h.label(9, shaC)
	h.settle()
	h.label(8, shaB)
	h.settle()

	for _, tok := range []string{adminToken, "wrong-token"} {
		for _, u := range []string{"/queue?tenant=1&repo=Codertocat/Hello-World", "/", "/metrics"} {
			req, _ := http.NewRequest(http.MethodGet, h.admin+u, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	req, _ := http.NewRequest(http.MethodPost, h.admin+"/reconcile", strings.NewReader(`{"tenant":"1","repo":"Codertocat/Hello-World"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	// A delivery signed with another secret: 401, logged.
	body := h.prPayload("labeled", 10, shaB, "automerge")
	req, _ = http.NewRequest(http.MethodPost, h.pub+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "forged-1")
	req.Header.Set("X-Hub-Signature-256", "sha256=0000")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	// A GET without any of GitHub's headers: 405, logged without the
	// keys it has no value for.
	if resp, err := http.Get(h.pub + "/webhook"); err == nil {
		resp.Body.Close()
	}
	h.settle()
	// Stop first: the log is read only once nothing writes it any more.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	log := h.logBuf.String()
	if h.gh.TokensIssued() < 1 {
		t.Fatal("the scenario minted no installation token")
	}
	secrets := pemSecrets(h.gh.PrivateKeyPEM())
	secrets["webhook secret"] = testSecret
	secrets["admin token"] = adminToken
	if found := secretsIn(log, secrets); len(found) > 0 {
		t.Errorf("the log shows: %v", found)
	}
	if m := installationToken.FindString(log); m != "" {
		t.Errorf("the log shows an installation token %q", m)
	}
	if strings.Contains(log, "ghs_") {
		t.Error(`the log shows "ghs_"`)
	}
	checkLogKeys(t, log)
	if t.Failed() {
		t.Logf("log:\n%s", log)
	}
}

// snakeCase is the one style of log keys: people grep and query for them.
var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// durationWords are parts of a key that say it holds a time span: such a
// key ends in its unit (took_ms, age_ms, expires_in_ms).
var durationWords = regexp.MustCompile(`(^|_)(took|age|elapsed|duration|delay|wait|waited|expires_in|timeout|backoff|retry_in)(_|$)`)

// checkKeyStyle: no empty key and no key with an empty value, every key
// snake_case, every time span with
// its unit; nested objects too.
func checkKeyStyle(t *testing.T, obj map[string]any, prefix, raw string) {
	t.Helper()
	for k, v := range obj {
		switch {
		case k == "":
			t.Errorf("a log line has an empty key: %s", raw)
		case v == "":
			t.Errorf("log key %q is empty (leave out what does not apply): %s", prefix+k, raw)
		case !snakeCase.MatchString(k):
			t.Errorf("log key %q is not snake_case: %s", prefix+k, raw)
		case durationWords.MatchString(k) && !strings.HasSuffix(k, "_ms") && !strings.HasSuffix(k, "_s") && !strings.HasSuffix(k, "_at"):
			t.Errorf("log key %q is a time span without its unit (want %s_ms): %s", prefix+k, k, raw)
		}
		if m, ok := v.(map[string]any); ok {
			checkKeyStyle(t, m, prefix+k+".", raw)
		}
	}
}

// checkLogKeys: every line is JSON, with snake_case keys, none empty; one line per delivery and per queue
// transition, each with its fixed keys.
func checkLogKeys(t *testing.T, log string) {
	t.Helper()
	keys := map[string][]string{
		"webhook delivery": {"status"}, // a refused request may carry no delivery id or event
		"delivery applied": {"delivery", "tenant", "repo", "result"},
		"gate passed":      {"tenant", "repo", "pr", "sha"},
		"bounced":          {"tenant", "repo", "pr", "sha", "problem", "reason"},
		"merged":           {"tenant", "repo", "pr", "sha", "method"},
	}
	seen := map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Errorf("a log line is not JSON: %s", sc.Text())
			continue
		}
		checkKeyStyle(t, line, "", sc.Text())
		msg, _ := line["message"].(string)
		want, ok := keys[msg]
		if !ok {
			continue
		}
		seen[msg]++
		if msg == "delivery applied" && line["level"] == "debug" {
			want = append(want, "event") // at debug the line says more
		}
		if msg == "webhook delivery" && line["status"] == float64(http.StatusAccepted) {
			want = append(want, "delivery", "event", "action", "tenant", "repo") // a stored delivery names its repository
		}
		for _, k := range want {
			if _, ok := line[k]; !ok {
				t.Errorf("%q line lacks %q: %s", msg, k, sc.Text())
			}
		}
	}
	for msg := range keys {
		if seen[msg] == 0 {
			t.Errorf("no %q line in the log", msg)
		}
	}
}
