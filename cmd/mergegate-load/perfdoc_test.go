package main

import (
	"os"
	"strings"
	"testing"
)

// docs/performance.md is one page (at most 200 lines): what to expect and
// how to measure it. The load tool's measurement notes go there, not into
// its comments; a note that makes it longer tightens something else.
func TestPerformanceDocIsOnePage(t *testing.T) {
	b, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 200 {
		t.Errorf("docs/performance.md has %d lines, more than a page (200): tighten it", n)
	}
}
