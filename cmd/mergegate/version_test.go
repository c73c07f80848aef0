package main

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/migrations"
)

// mergegate version names the version, the commit, the Go it was built
// with and the schema version, on one line; an argument is a usage error.
func TestVersionNamesCommitAndGo(t *testing.T) {
	oldV, oldC := version, commit
	version, commit = "v1.2.3", "1a2b3c4d"
	defer func() { version, commit = oldV, oldC }()
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d, %q", code, errOut.String())
	}
	want := fmt.Sprintf("mergegate v1.2.3 (commit 1a2b3c4d, %s, schema version %d)\n", runtime.Version(), migrations.Latest())
	if out.String() != want {
		t.Errorf("version printed %q, want %q", out.String(), want)
	}
	errOut.Reset()
	if code := run([]string{"version", "--json"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unexpected arguments") {
		t.Errorf("version --json: exit %d, %q", code, errOut.String())
	}
}
