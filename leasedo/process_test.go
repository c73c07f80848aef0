package leasedo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/migrations"
)

// The multi-process tests re-execute the test binary as helper processes
// (TestHelperProcess with LEASEDO_HELPER set). A helper prints "READY", then
// for every line "GO <arg>" on stdin runs one round and prints one
// "REPORT <json>" line; it exits at EOF.
const (
	helperEnv     = "LEASEDO_HELPER"      // mode: acquire or migrate
	helperNameEnv = "LEASEDO_HELPER_NAME" // the holder name it acquires as
	helperDBEnv   = "LEASEDO_HELPER_DB"   // acquire: the shared database file
	helperGoEnv   = "LEASEDO_HELPER_GOROUTINES"
	helperNEnv    = "LEASEDO_HELPER_ATTEMPTS" // per goroutine
)

type helperReport struct {
	Won     int            `json:"won"`
	Locked  int            `json:"locked"`
	HeldBy  map[string]int `json:"heldBy"` // holder named by the LockedErrors
	Errors  []string       `json:"errors"`
	Version int            `json:"version"`
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return // not a helper: nothing to test
	}
	code := 0
	if err := runHelper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		code = 2
	}
	os.Exit(code) // keep the test framework's output off stdout
}

func runHelper(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := os.Getenv(helperNameEnv)
	goroutines, _ := strconv.Atoi(os.Getenv(helperGoEnv))
	attempts, _ := strconv.Atoi(os.Getenv(helperNEnv))

	var s *Store
	if mode == "acquire" {
		db, err := Open(ctx, os.Getenv(helperDBEnv), Options{})
		if err != nil {
			return err
		}
		defer db.Close()
		// Every helper's clock stands at the same instant and the TTL is
		// long: no lease can expire during the race.
		s = NewStore(db, Config{TTL: time.Hour, Dead: 2 * time.Hour, Clock: NewManualClock(t0)})
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "READY")
	out.Flush()

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		arg, ok := strings.CutPrefix(in.Text(), "GO ")
		if !ok {
			return fmt.Errorf("bad command %q", in.Text())
		}
		rep := helperReport{HeldBy: map[string]int{}}
		switch mode {
		case "acquire":
			k := Key{Tenant: "42", Repo: arg}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := 0; g < goroutines; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < attempts; i++ {
						_, err := s.Acquire(ctx, k, name)
						var le *LockedError
						mu.Lock()
						switch {
						case err == nil:
							rep.Won++
						case errors.As(err, &le):
							rep.Locked++
							rep.HeldBy[le.HeldBy]++
						default:
							rep.Errors = append(rep.Errors, err.Error())
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
		case "migrate":
			db, err := Open(ctx, arg, Options{})
			if err != nil {
				rep.Errors = append(rep.Errors, err.Error())
				break
			}
			if rep.Version, err = db.SchemaVersion(ctx); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
			// And it is usable at once: one write.
			st := NewStore(db, Config{Clock: NewManualClock(t0)})
			if err := st.Track(ctx, Key{Tenant: "42", Repo: name}); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
			if err := db.Close(); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		b, _ := json.Marshal(rep)
		fmt.Fprintf(out, "REPORT %s\n", b)
		out.Flush()
	}
	return in.Err()
}

type helperProc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Scanner
	stderr bytes.Buffer
}

func (h *helperProc) readLine(t *testing.T, prefix string) string {
	t.Helper()
	if !h.stdout.Scan() {
		t.Fatalf("helper %s: no %s line (%v); stderr:\n%s", h.name, prefix, h.stdout.Err(), h.stderr.String())
	}
	rest, ok := strings.CutPrefix(h.stdout.Text(), prefix)
	if !ok {
		t.Fatalf("helper %s: got %q, want %s…; stderr:\n%s", h.name, h.stdout.Text(), prefix, h.stderr.String())
	}
	return rest
}

// startHelpers starts n helper processes in mode and waits until each is
// READY (its database, if any, open).
func startHelpers(t *testing.T, mode string, n int, env ...string) []*helperProc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	var hs []*helperProc
	for i := 0; i < n; i++ {
		h := &helperProc{name: fmt.Sprintf("proc-%d", i)}
		h.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		h.cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperNameEnv+"="+h.name)
		// The race detector sleeps 1 s at exit by default; not here.
		h.cmd.Env = append(h.cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		h.cmd.Env = append(h.cmd.Env, env...)
		h.cmd.Stderr = &h.stderr
		var err error
		if h.stdin, err = h.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stdout, err := h.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		h.stdout = bufio.NewScanner(stdout)
		if err := h.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	t.Cleanup(func() {
		for _, h := range hs {
			h.stdin.Close()
			if err := h.cmd.Wait(); err != nil {
				t.Errorf("helper %s: %v; stderr:\n%s", h.name, err, h.stderr.String())
			}
		}
	})
	for _, h := range hs {
		h.readLine(t, "READY")
	}
	return hs
}

// round is the barrier: every helper is blocked reading stdin; the GO lines
// go out back to back and each helper starts at once. It returns the
// reports by helper name.
func round(t *testing.T, hs []*helperProc, arg string) map[string]helperReport {
	t.Helper()
	for _, h := range hs {
		if _, err := fmt.Fprintf(h.stdin, "GO %s\n", arg); err != nil {
			t.Fatalf("helper %s: %v", h.name, err)
		}
	}
	reps := map[string]helperReport{}
	for _, h := range hs {
		var rep helperReport
		if err := json.Unmarshal([]byte(h.readLine(t, "REPORT ")), &rep); err != nil {
			t.Fatal(err)
		}
		reps[h.name] = rep
	}
	return reps
}

// Four processes, each with four goroutines, race to acquire one (tenant,
// repo) on one database file, five rounds with a fresh repo each: exactly
// one acquire in all wins, every other one is answered locked by that
// winner, and no SQLITE_BUSY ("database is locked") reaches a caller.
func TestTwoProcessesAcquire(t *testing.T) {
	const procs, goroutines, attempts, rounds = 4, 4, 10, 5
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "shared.db")
	db, err := Open(ctx, path, Options{}) // created and migrated once
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := NewStore(db, Config{TTL: time.Hour, Clock: NewManualClock(t0)})

	hs := startHelpers(t, "acquire", procs, helperDBEnv+"="+path,
		helperGoEnv+"="+strconv.Itoa(goroutines), helperNEnv+"="+strconv.Itoa(attempts))
	for r := 0; r < rounds; r++ {
		repo := fmt.Sprintf("octo/round-%d", r)
		start := time.Now()
		reps := round(t, hs, repo)
		won, locked, winner := 0, 0, ""
		heldBy := map[string]int{}
		for name, rep := range reps {
			for _, e := range rep.Errors {
				t.Errorf("round %d: %s got %s", r, name, e)
			}
			if rep.Won > 0 {
				winner = name
			}
			won += rep.Won
			locked += rep.Locked
			for h, n := range rep.HeldBy {
				heldBy[h] += n
			}
		}
		total := procs * goroutines * attempts
		if won != 1 || locked != total-1 {
			t.Fatalf("round %d: won=%d locked=%d of %d attempts, want exactly one winner", r, won, locked, total)
		}
		if len(heldBy) != 1 || heldBy[winner] != total-1 {
			t.Fatalf("round %d: winner %s, locked errors name %v", r, winner, heldBy)
		}
		st, err := s.Check(ctx, Key{Tenant: "42", Repo: repo})
		if err != nil || !st.Locked || st.HeldBy != winner {
			t.Fatalf("round %d: lease = %+v %v, want held by %s", r, st, err, winner)
		}
		t.Logf("round %d: %s won, %d locked, %v", r, winner, locked, time.Since(start))
	}
}

// Processes opening a new database file at the same instant all migrate it
// without error; each migration is recorded once.
func TestTwoProcessesMigrate(t *testing.T) {
	const procs, rounds = 4, 8
	ctx := context.Background()
	dir := t.TempDir()
	hs := startHelpers(t, "migrate", procs)
	for r := 0; r < rounds; r++ {
		path := filepath.Join(dir, fmt.Sprintf("new-%d.db", r))
		start := time.Now()
		for name, rep := range round(t, hs, path) {
			if len(rep.Errors) != 0 || rep.Version != migrations.Latest() {
				t.Fatalf("round %d: %s: version %d, errors %v", r, name, rep.Version, rep.Errors)
			}
		}
		db, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var rows, tracked int
		if err := db.r.QueryRow(`SELECT count(*) FROM schema_version`).Scan(&rows); err != nil || rows != migrations.Latest() {
			t.Fatalf("round %d: %d schema_version rows (%v), want one per migration", r, rows, err)
		}
		if err := db.r.QueryRow(`SELECT count(*) FROM repos`).Scan(&tracked); err != nil || tracked != procs {
			t.Fatalf("round %d: %d repos tracked (%v), want one per process", r, tracked, err)
		}
		if ok, err := db.IntegrityCheck(ctx); ok != "ok" || err != nil {
			t.Fatalf("round %d: integrity %q %v", r, ok, err)
		}
		db.Close()
		t.Logf("round %d: %v", r, time.Since(start))
	}
}

// FuzzEventJSON: any body decoded as an Event and accepted by Validate is
// processed without a panic, and never leaves its lease held; a body that
// Validate accepts is refused, if at all, only with a FieldError.
func FuzzEventJSON(f *testing.F) {
	for _, seed := range []string{
		`{"eventType":"pull_request","tenant":"42","repo":"octo/hello","action":"opened","prNumber":1,"details":{"sha":"a"}}`,
		`{"eventType":"pull_request","tenant":"42","repo":"octo/hello","action":"closed","prNumber":1,"details":null}`,
		`{"eventType":"pull_request","tenant":"42","repo":"octo/hello","action":"synchronize","prNumber":1,"details":{"sha":"b"}}`,
		`{"eventType":"check_run","tenant":"42","repo":"octo/hello","action":"completed","details":{"sha":"b","gateResult":"success"}}`,
		`{"eventType":"status","tenant":"42","repo":"octo/hello","details":{"sha":"b","gateResult":"failure","reason":"ci"}}`,
		`{"eventType":"pull_request","tenant":"42","repo":"octo/hello","action":"opened","prNumber":2}`,          // no sha: refused inside the transaction
		`{"eventType":"pull_request","tenant":"42","repo":"octo/hello","action":"opened","details":{"sha":"x"}}`, // no PR number
		`{"eventType":"status","tenant":"1","repo":"a/b","details":{"sha":"x","gateResult":"green"}}`,            // invalid gate result
		`{"eventType":"pull_request","tenant":"1","repo":"a/b","prNumber":-3}`,                                   // negative
		`{"eventType":"pull_request","tenant":"1","repo":"a/b","action":"labeled","prNumber":9223372036854775807,"details":{"sha":"s","queuedAt":-1}}`,
		`{"eventType":"pull_request","tenant":"\u0000","repo":"é/\ud800","action":"labeled","prNumber":3,"details":{"sha":"\u0000"}}`,
		`{"tenant":"42"}`,
		`null`,
		`[]`,
		`{`,
		``,
	} {
		f.Add([]byte(seed))
	}
	s, clk := openTB(f, Options{})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, body []byte) {
		var ev Event
		if json.Unmarshal(body, &ev) != nil || ev.Validate() != nil {
			return
		}
		clk.Advance(time.Millisecond)
		ops := []Op{OpJoin, OpLeave, OpReevaluate, OpRecheck, OpIgnore}
		ev.Op = ops[len(body)%len(ops)]
		_, err := s.ProcessEvent(ctx, ev, "fuzz")
		var fe *FieldError
		if err != nil && !errors.As(err, &fe) {
			t.Fatalf("ProcessEvent(%+v): %v (want nil or a FieldError)", ev, err)
		}
		st, cerr := s.Check(ctx, ev.Key())
		if cerr != nil || st.Locked || st.HeldBy != "" {
			t.Fatalf("after ProcessEvent(%+v) = %v: lease %+v %v", ev, err, st, cerr)
		}
	})
}
