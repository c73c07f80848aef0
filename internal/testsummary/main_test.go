package main

import (
	"strings"
	"testing"
)

// A stream with a pass, a skip, a failure and a package that did not
// build: the failure's output and the package lines are printed, the
// skip's reason is listed, the last line counts, and the exit is 1.
func TestSummarize(t *testing.T) {
	stream := `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestOK"}
{"Action":"output","Package":"m/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"m/a","Test":"TestOK","Output":"    a_test.go:3: chatter\n"}
{"Action":"pass","Package":"m/a","Test":"TestOK"}
{"Action":"run","Package":"m/a","Test":"TestPG"}
{"Action":"output","Package":"m/a","Test":"TestPG","Output":"    pg.go:37: PostgreSQL: set X to run this test\n"}
{"Action":"output","Package":"m/a","Test":"TestPG","Output":"--- SKIP: TestPG (0.00s)\n"}
{"Action":"skip","Package":"m/a","Test":"TestPG"}
{"Action":"run","Package":"m/a","Test":"TestBad"}
{"Action":"output","Package":"m/a","Test":"TestBad","Output":"    a_test.go:9: got 1, want 2\n"}
{"Action":"output","Package":"m/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"m/a","Test":"TestBad"}
{"Action":"output","Package":"m/a","Output":"FAIL\tm/a\t0.01s\n"}
{"Action":"fail","Package":"m/a"}
{"Action":"build-output","ImportPath":"m/b","Output":"b.go:1: syntax error\n"}
{"Action":"output","Package":"m/b","Output":"FAIL\tm/b [build failed]\n"}
{"Action":"fail","Package":"m/b"}
`
	var out strings.Builder
	if code := summarize(strings.NewReader(stream), &out); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	got := out.String()
	for _, want := range []string{"got 1, want 2", "--- FAIL: TestBad", "FAIL\tm/a\t0.01s", "b.go:1: syntax error", "FAIL\tm/b [build failed]",
		"skipped 1 tests:\n  PostgreSQL: set X to run this test\n    (m/a.TestPG)\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatter") {
		t.Errorf("a passed test's output is printed:\n%s", got)
	}
	if !strings.HasSuffix(got, "\n1 passed, 1 failed\n") && !strings.HasSuffix(got, ")\n1 passed, 1 failed\n") {
		t.Errorf("last line: %q", got[strings.LastIndex(strings.TrimSuffix(got, "\n"), "\n")+1:])
	}
	out.Reset()
	if code := summarize(strings.NewReader(""), &out); code != 1 {
		t.Errorf("no package reported: exit %d, want 1", code)
	}
}
