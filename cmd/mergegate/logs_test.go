package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The start line names the build and, with --record, the folder it
// records into; without --record it carries no record key (no empty key).
func TestStartLineNamesVersionAndRecordFolder(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "recorded")
	for _, extra := range [][]string{{"--record", rec}, nil} {
		s := startServer(t, filepath.Join(t.TempDir(), "m.db"), extra...)
		var start map[string]any
		for _, line := range strings.Split(s.Log(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(line), &m) == nil && m["message"] == "mergegate listening" {
				start = m
			}
		}
		if start == nil {
			t.Fatalf("no start line:\n%s", s.Log())
		}
		if start["version"] != version || start["commit"] == "" || start["commit"] == nil {
			t.Errorf("start line %v: want version %q and a commit", start, version)
		}
		got, has := start["record"]
		if extra != nil && got != rec {
			t.Errorf("start line record = %v, want %s", got, rec)
		}
		if extra == nil && has {
			t.Errorf("start line without --record has record = %q", got)
		}
		s.Stop(t)
	}
}

// --log-format console writes no colour codes where stderr is not a
// terminal (a file, a pipe, the journal).
func TestConsoleLogHasNoColourOffATerminal(t *testing.T) {
	v := values{"log-level": "info", "log-format": "console"}
	var buf bytes.Buffer
	log, err := newLogger(v, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Str("repo", "o/r").Msg("hello")
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Fatal("a regular file taken for a terminal")
	}
	flog, err := newLogger(v, f)
	if err != nil {
		t.Fatal(err)
	}
	flog.Info().Time("at", time.Unix(0, 0)).Msg("to a file")
	b, _ := os.ReadFile(f.Name())
	for name, out := range map[string]string{"buffer": buf.String(), "file": string(b)} {
		if strings.Contains(out, "\x1b[") || !strings.Contains(out, "INF") {
			t.Errorf("console log to a %s: %q, want plain text", name, out)
		}
	}
}
