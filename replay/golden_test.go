package replay

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite the expected output (expected.golden) of testdata/scenarios")

// goldenFile is a scenario's expected output, beside its deliveries.
const goldenFile = "expected" + GoldenSuffix

// scenarioDirs lists the scenario folders of testdata/scenarios.
func scenarioDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(scenariosDir)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) < 8 {
		t.Fatalf("testdata/scenarios holds %d scenarios, want at least 8", len(dirs))
	}
	return dirs
}

// replayDir replays one folder offline, as `mergegate replay --offline DIR`.
func replayDir(t *testing.T, paths ...string) []byte {
	t.Helper()
	in, skipped, err := Load(paths, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) > 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	var warn bytes.Buffer
	out, err := Offline(context.Background(), in.Deliveries, Options{Scenario: in.Scenario, Files: in.Files, Warn: &warn})
	if err != nil {
		t.Fatal(err)
	}
	if warn.Len() > 0 {
		t.Fatalf("warnings:\n%s", warn.String())
	}
	return out
}

// TestReplayGolden replays every scenario of testdata/scenarios offline and
// compares the printed state with its expected.golden (-update rewrites
// them). Each scenario is replayed twice: the output must not change by a
// byte.
func TestReplayGolden(t *testing.T) {
	for _, name := range scenarioDirs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(scenariosDir, name)
			start := time.Now()
			got := replayDir(t, dir)
			took := time.Since(start)
			if again := replayDir(t, dir); !bytes.Equal(got, again) {
				t.Fatalf("two replays of the same input differ:\n%s\n---\n%s", got, again)
			}
			t.Logf("replayed in %s", took)
			golden := filepath.Join(dir, goldenFile)
			if *updateGolden {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("replay of %s differs from %s (run with -update if the change is intended):\n%s", dir, golden, lineDiff(string(want), string(got)))
			}
		})
	}
}

// lineDiff shows the first lines where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			lo, hi := max(i-3, 0), i+4
			var b strings.Builder
			for j := lo; j < hi; j++ {
				if j < len(w) {
					b.WriteString("- " + w[j] + "\n")
				}
			}
			for j := lo; j < hi; j++ {
				if j < len(g) {
					b.WriteString("+ " + g[j] + "\n")
				}
			}
			return "at line " + strconv.Itoa(i+1) + ":\n" + b.String()
		}
	}
	return "(no line differs)"
}
