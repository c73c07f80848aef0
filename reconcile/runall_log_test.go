package reconcile

import (
	"encoding/json"
	"strings"
	"testing"
)

// The "reconcile run" line leaves a key out rather than log it empty
// (docs/operations.md, Logs): a pass without discovery (no GitHub App
// yet) has no "discovery":"", a pass no installation's rate limit stopped
// no "rate_limited":[]. Every other line of the pass is held to it too.
func TestRunAllLogLeavesOutEmptyKeys(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Forge, c.Syncer = nil, nil })
	if _, err := e.r.RunAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m["message"] == "reconcile run" {
			n++
		}
		for k, v := range m {
			if isEmpty(v) {
				t.Errorf("%v logs %q empty: %s", m["message"], k, line)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no reconcile run line:\n%s", e.logs.String())
	}
}

// isEmpty: an empty string, list or object, as a JSON log line holds it.
func isEmpty(v any) bool {
	switch v := v.(type) {
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}
