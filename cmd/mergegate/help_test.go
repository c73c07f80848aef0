package main

import (
	"bytes"
	"strings"
	"testing"
)

// `mergegate help NAME` works for every command in the usage text, prints
// what `mergegate NAME -h` prints, on stdout, and exits 0; the commands
// of the binary itself share one format.
func TestHelpForEveryCommand(t *testing.T) {
	clearEnv(t)
	var names []string
	for _, line := range strings.Split(usage, "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "  mergegate ") && len(f) > 1 {
			names = append(names, f[1])
		}
	}
	if len(names) < 7 {
		t.Fatalf("found only %v in the usage text", names)
	}
	for _, name := range names {
		var out, errOut bytes.Buffer
		if code := run([]string{"help", name}, &out, &errOut); code != 0 || out.Len() == 0 || errOut.Len() != 0 {
			t.Errorf("help %s: exit %d, stdout %d bytes, stderr %q", name, code, out.Len(), errOut.String())
			continue
		}
		if !strings.HasPrefix(out.String(), "usage: mergegate "+name) {
			t.Errorf("help %s does not start with its synopsis: %q", name, out.String())
		}
		if name == "version" || name == "help" {
			continue // no flags
		}
		if name != "validate" && (!strings.Contains(out.String(), "\nflags (") || !strings.Contains(out.String(), "  --")) {
			t.Errorf("help %s lists no flags: %q", name, out.String())
		}
		var dashH, dashHErr bytes.Buffer
		if code := run([]string{name, "-h"}, &dashH, &dashHErr); code != 0 || dashHErr.String() != out.String() {
			t.Errorf("%s -h: exit %d, and its text differs from help %s:\n%s\n---\n%s", name, code, name, dashHErr.String(), out.String())
		}
	}
	var out bytes.Buffer
	if code := run([]string{"help", "nope"}, &out, &out); code != 2 || !strings.Contains(out.String(), `unknown command "nope"`) {
		t.Errorf("help nope: %d %q", code, out.String())
	}
}
