package main

import (
	"strings"
	"testing"
)

func TestRedeliverBudgetSetting(t *testing.T) {
	clearEnv(t)
	v, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.appConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.RedeliverBudget != 20 {
		t.Fatalf("default budget = %d, want 20", c.RedeliverBudget)
	}
	t.Setenv("MERGEGATE_REDELIVER_BUDGET", "0")
	if v, _ = parse(t); v["redeliver-budget"] != "0" {
		t.Fatalf("env: %q", v["redeliver-budget"])
	}
	if c, err = v.appConfig(); err != nil || c.RedeliverBudget != 0 {
		t.Fatalf("0 (off): %d %v", c.RedeliverBudget, err)
	}
	for _, bad := range []string{"-1", "many"} {
		v, _ = parse(t, "--redeliver-budget", bad)
		if _, err := v.appConfig(); err == nil || !strings.Contains(err.Error(), "--redeliver-budget") {
			t.Errorf("%q: %v, want an error naming the flag", bad, err)
		}
	}
}
