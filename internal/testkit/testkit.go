package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/leasedo"
)

// OpenDB opens (creating and migrating) the SQLite database at path, and
// closes it when the test ends.
func OpenDB(tb testing.TB, path string, opt leasedo.Options) *leasedo.DB {
	tb.Helper()
	db, err := leasedo.Open(context.Background(), path, opt)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Store is a store on a new database in tb.TempDir(), with cfg (its clock,
// TTLs); the database is closed when the test ends.
func Store(tb testing.TB, cfg leasedo.Config) *leasedo.Store {
	tb.Helper()
	return leasedo.NewStore(OpenDB(tb, filepath.Join(tb.TempDir(), "mergegate.db"), leasedo.Options{}), cfg)
}

// Forge is a forge client of gh's App: cfg as given, with the fake's URL,
// App id and key where cfg leaves them empty.
func Forge(tb testing.TB, gh *fakegithub.Server, cfg forge.Config) *forge.Client {
	tb.Helper()
	if cfg.BaseURL == "" {
		cfg.BaseURL = gh.URL()
	}
	if cfg.AppID == 0 {
		cfg.AppID = gh.AppID()
	}
	if cfg.PrivateKey == nil {
		cfg.PrivateKey = gh.PrivateKeyPEM()
	}
	c, err := forge.New(cfg)
	if err != nil {
		tb.Fatalf("forge.New: %v", err)
	}
	return c
}

// Testdata is the path of elem under the repository's testdata folder,
// whichever package's folder the test runs in.
func Testdata(elem ...string) string {
	_, file, _, _ := runtime.Caller(0) // .../internal/testkit/testkit.go
	return filepath.Join(append([]string{filepath.Dir(file), "..", "..", "testdata"}, elem...)...)
}

// ReadTestdata reads the file elem of the repository's testdata.
func ReadTestdata(tb testing.TB, elem ...string) []byte {
	tb.Helper()
	b, err := os.ReadFile(Testdata(elem...))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// Payload is the payload example name of testdata/github-webhooks (e.g.
// "pull_request/labeled.payload.json") as a JSON object, with the
// installation (id 1) that a GitHub App's delivery carries and the examples
// from repository hooks lack.
func Payload(tb testing.TB, name string) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(ReadTestdata(tb, "github-webhooks", name), &m); err != nil {
		tb.Fatal(err)
	}
	m["installation"] = map[string]any{"id": 1, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
	return m
}

// SyncBuffer is a bytes.Buffer that a server's goroutines write to (a
// logger's output) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// EventuallyWithin bounds Eventually: far above any wait a passing test
// makes, so that a loaded machine (CI under -race) does not fail it.
const EventuallyWithin = 30 * time.Second

// Eventually polls cond, a millisecond apart, until it holds, and fails the
// test after EventuallyWithin. It is for synchronisation with goroutines
// (a server's, a worker's), not for timing: a test that needs time to
// pass moves the injected clock (leasedo.ManualClock).
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(EventuallyWithin)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// MainWithBinary is a TestMain for tests that run a real binary: it builds
// the command pkg (as `go build` names it, relative to the test's folder)
// into a temporary folder, sets *bin to its path, runs the tests, removes
// the folder and exits with the tests' status.
func MainWithBinary(m *testing.M, pkg string, bin *string) {
	dir, err := os.MkdirTemp("", "mergegate-bin")
	if err != nil {
		panic(err)
	}
	*bin = filepath.Join(dir, "mergegate")
	out, err := exec.Command("go", "build", "-o", *bin, pkg).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
