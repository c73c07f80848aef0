package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/leasedo"
)

// TestExportReplaysToTheSameQueue is the round trip of `mergegate export`
// for every scenario: the real app.App serves against a fake GitHub and
// receives the scenario's deliveries over HTTP, signed; then the
// deliveries it stored are exported from its database (no --record
// needed) and replayed offline. The replay must end where the live App
// ended (the scenario's expected.golden: queue, audit, events, merges),
// the export must be what --record wrote, file for file, and no file of
// it may hold the webhook secret or a signature.
func TestExportReplaysToTheSameQueue(t *testing.T) {
	for _, name := range scenarioDirs(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(scenariosDir, name)
			want, err := os.ReadFile(filepath.Join(dir, goldenFile))
			if err != nil {
				t.Fatal(err)
			}
			in, _, err := Load([]string{dir}, true)
			if err != nil {
				t.Fatal(err)
			}
			l := startLiveApp(t, true)
			drv := newDriver(l.gh, l.clk, in.Scenario, replayEpoch)
			for i, rec := range in.Deliveries {
				body, err := drv.before(rec)
				if err != nil {
					t.Fatal(err)
				}
				status, answer := l.send(rec, body)
				if status != http.StatusAccepted {
					t.Fatalf("%s answered %d %+v", in.Files[i], status, answer)
				}
				drv.after(rec, body, status, answer)
				l.settle()
			}
			live, err := drv.state(context.Background(), l.app.Store)
			if err != nil {
				t.Fatal(err)
			}
			liveJSON, _ := json.MarshalIndent(live, "", "  ")
			liveJSON = append(liveJSON, '\n')
			l.stop()

			ctx := context.Background()
			db, err := leasedo.Open(ctx, l.db, leasedo.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "exported")
			var total int
			for _, k := range reposOf(live) {
				n, err := app.Export(ctx, leasedo.NewStore(db, leasedo.Config{}), k, time.Time{}, filepath.Join(out, k.Tenant+"-"+strings.ReplaceAll(k.Repo, "/", "-")))
				if err != nil {
					t.Fatal(err)
				}
				total += n
			}
			db.Close()
			if total == 0 {
				t.Fatal("nothing exported")
			}

			// What --record wrote, the export wrote too, byte for byte
			// (a scenario's deliveries are all of one repository).
			recorded, err := os.ReadDir(l.record)
			if err != nil {
				t.Fatal(err)
			}
			var exported []string
			filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error { //nolint:errcheck
				if err == nil && !d.IsDir() {
					exported = append(exported, p)
				}
				return nil
			})
			for _, p := range exported {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, secret := range []string{roundTripSecret, "X-Hub-Signature", "sha256="} {
					if bytes.Contains(b, []byte(secret)) {
						t.Errorf("%s holds %q", p, secret)
					}
				}
			}
			if len(reposOf(live)) == 1 {
				if len(exported) != len(recorded) {
					t.Fatalf("exported %d deliveries, --record wrote %d", len(exported), len(recorded))
				}
				for i, e := range recorded {
					rec, _ := os.ReadFile(filepath.Join(l.record, e.Name()))
					exp, _ := os.ReadFile(exported[i])
					if filepath.Base(exported[i]) != e.Name() || !bytes.Equal(rec, exp) {
						t.Fatalf("exported %s differs from the recorded %s", exported[i], e.Name())
					}
				}
			}

			paths := append([]string{}, exported...)
			if in.Scenario.Required != nil || in.Scenario.Behind != nil || in.Scenario.Files != nil || in.Scenario.Roles != nil {
				paths = append(paths, filepath.Join(dir, ScenarioFile))
			}
			got := replayDir(t, paths...)
			if !bytes.Equal(got, liveJSON) {
				t.Fatalf("the offline replay of the export differs from the live App's state:\n%s", lineDiff(string(liveJSON), string(got)))
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("the offline replay of the export differs from %s:\n%s", goldenFile, lineDiff(string(want), string(got)))
			}
		})
	}
}

func reposOf(s *State) []leasedo.Key {
	var out []leasedo.Key
	for _, r := range s.Repos {
		out = append(out, leasedo.Key{Tenant: r.Tenant, Repo: r.Repo})
	}
	return out
}
