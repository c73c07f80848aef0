// Command testsummary reads `go test -json` on stdin and prints what plain
// `go test` prints (each package's ok or FAIL line, a failed test's
// output), then every skipped test with its reason (which says how to run
// it), then "N passed, N failed". It exits 1 when a test or a package
// failed, or when no package reported at all. `make test` pipes into it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	os.Exit(summarize(os.Stdin, os.Stdout))
}

type skip struct{ pkg, test, reason string }

func summarize(in io.Reader, out io.Writer) int {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	outputs := map[string][]string{} // package + test -> its output so far
	var skips []skip
	passed, failed, pkgs, pkgFailed := 0, 0, 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line) // not JSON: go test's own complaint
			continue
		}
		key := e.Package + " " + e.Test
		switch {
		case e.Action == "output" || e.Action == "build-output":
			if e.Test == "" {
				if !strings.HasPrefix(e.Output, "=== ") && e.Output != "PASS\n" {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case e.Test == "" && (e.Action == "pass" || e.Action == "skip"):
			pkgs++
		case e.Test == "" && e.Action == "fail":
			pkgs++
			pkgFailed++
		case e.Action == "pass":
			if !strings.Contains(e.Test, "/") {
				passed++
			}
			delete(outputs, key)
		case e.Action == "fail":
			if !strings.Contains(e.Test, "/") {
				failed++
			}
			for _, o := range outputs[key] {
				if !strings.HasPrefix(o, "=== ") {
					fmt.Fprint(out, o)
				}
			}
			delete(outputs, key)
		case e.Action == "skip":
			skips = append(skips, skip{e.Package, e.Test, reason(outputs[key])})
			delete(outputs, key)
		}
	}
	if len(skips) > 0 {
		// One line per reason: the reason says how to run them.
		by := map[string][]string{}
		var reasons []string
		for _, s := range skips {
			if by[s.reason] == nil {
				reasons = append(reasons, s.reason)
			}
			by[s.reason] = append(by[s.reason], strings.TrimPrefix(s.pkg, "github.com/mergegate/mergegate/")+"."+s.test)
		}
		sort.Strings(reasons)
		fmt.Fprintf(out, "\nskipped %d tests:\n", len(skips))
		for _, r := range reasons {
			names := by[r]
			list := strings.Join(names, ", ")
			if len(names) > 4 {
				list = strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
			}
			fmt.Fprintf(out, "  %s\n    (%s)\n", r, list)
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", passed, failed)
	if failed > 0 || pkgFailed > 0 || pkgs == 0 {
		return 1
	}
	return 0
}

// reason is a skipped test's last logged line without its file:line.
func reason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		if _, rest, ok := strings.Cut(l, ": "); ok && strings.Contains(l[:len(l)-len(rest)], ".go:") {
			l = rest
		}
		return l
	}
	return "(no reason given)"
}
