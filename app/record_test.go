package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
)

// TestRecordNamesUnusableIdsFromAHash: every acknowledged delivery is
// recorded, whatever its id and event name (too long for a file name, dots,
// slashes); the file keeps the real values, and ids that differ get files
// that differ.
func TestRecordNamesUnusableIdsFromAHash(t *testing.T) {
	dir := t.TempDir()
	r, err := NewRecorder(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened","installation":{"id":7},"repository":{"full_name":"o/r"}}`)
	cases := []leasedo.Delivery{
		{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Event: "pull_request"},
		{ID: strings.Repeat("x", 100), Event: strings.Repeat("e", 250)},
		{ID: "..", Event: "push"},
		{ID: "../../etc/passwd", Event: "push"},
		{ID: "a/b", Event: "push"},
		{ID: "a_b", Event: "push"},
	}
	for _, d := range cases {
		d.Body = body
		if err := r.Record(d); err != nil {
			t.Fatalf("record %.20q: %v", d.ID, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(cases) {
		t.Fatalf("%d files for %d deliveries", len(entries), len(cases))
	}
	for i, e := range entries {
		if len(e.Name()) > 200 {
			t.Errorf("file name of %d bytes", len(e.Name()))
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var rec Recorded
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		if rec.Delivery != cases[i].ID || rec.Event != cases[i].Event {
			t.Errorf("file %s holds %.20q/%.20q, want %.20q/%.20q", e.Name(), rec.Delivery, rec.Event, cases[i].ID, cases[i].Event)
		}
	}
	if got := entries[0].Name(); got != "000001-pull_request-72d3162e-cc78-11e3-81ab-4c9367dc0958.json" {
		t.Errorf("a GUID delivery is named %s", got)
	}
}

// Issue 30, hole 8: recorded payloads are as private as the database:
// the folder 0700 (made so, or narrowed), each file 0600 (were 0750/0640).
func TestRecordIsPrivate(t *testing.T) {
	for _, existing := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "a", "rec")
		if existing {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		r, err := NewRecorder(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Record(leasedo.Delivery{ID: "d1", Event: "push", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		check := []string{dir}
		if !existing {
			check = append(check, filepath.Dir(dir)) // made by NewRecorder too
		}
		for _, p := range check {
			if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o700 {
				t.Errorf("existing %v: %s mode %v %v, want 0700", existing, p, st.Mode().Perm(), err)
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, f := range files {
			if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v %v, want 0600", f, st.Mode().Perm(), err)
			}
		}
		if len(files) != 1 {
			t.Errorf("files = %v", files)
		}
	}
}
