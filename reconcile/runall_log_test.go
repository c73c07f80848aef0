package reconcile

import (
	"encoding/json"
	"strings"
	"testing"
)

// The "reconcile run" line leaves a key out rather than log it empty
// (docs/operations.md, Logs): a pass without discovery (no GitHub App
// yet) has no "discovery":"".
func TestRunAllLogLeavesOutEmptyKeys(t *testing.T) {
	e := newEnv(t, func(c *Config) { c.Forge, c.Syncer = nil, nil })
	if _, err := e.r.RunAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(e.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["message"] != "reconcile run" {
			continue
		}
		n++
		for k, v := range m {
			if v == "" {
				t.Errorf("reconcile run logs %q empty: %s", k, line)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no reconcile run line:\n%s", e.logs.String())
	}
}
