package forge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
)

// BenchmarkEvaluateGate: one gate decision over a realistic set of
// results — 5 required checks, 20 check runs and statuses reported (some
// rerun, so several results share a name), on one sha.
func BenchmarkEvaluateGate(b *testing.B) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := forge.Required{Configured: true, Contexts: []string{"build", "test", "lint", "ci/status-0", "ci/status-1"}}
	var results []forge.CheckResult
	for i, name := range []string{"build", "test", "lint", "docs", "e2e", "bench", "vet", "race", "fuzz", "cover"} {
		results = append(results,
			forge.CheckResult{Name: name, Source: forge.SourceCheckRun, Status: "completed", Conclusion: "failure", At: t0.Add(time.Duration(i) * time.Second)},
			forge.CheckResult{Name: name, Source: forge.SourceCheckRun, Status: "completed", Conclusion: "success", At: t0.Add(time.Minute + time.Duration(i)*time.Second)})
	}
	for i := range 5 {
		results = append(results, forge.CheckResult{Name: fmt.Sprintf("ci/status-%d", i), Source: forge.SourceStatus, Status: "completed", Conclusion: "success", At: t0})
	}
	results = append(results, forge.CheckResult{Name: forge.DefaultCheckRunName, Source: forge.SourceCheckRun, Status: "in_progress", At: t0})
	b.Run("required", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v := forge.EvaluateGate(req, results, nil); v.Result != forge.GateSuccess {
				b.Fatalf("verdict %+v", v)
			}
		}
	})
	b.Run("all-reported", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v := forge.EvaluateGate(forge.Required{}, results, nil); v.Result != forge.GateSuccess {
				b.Fatalf("verdict %+v", v)
			}
		}
	})
}
