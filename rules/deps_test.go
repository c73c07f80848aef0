package rules_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRulesImportsOnlyItsVocabulary: a reader of rules needs nothing below
// it to understand a decision. Of mergegate's packages, rules depends on
// lifecycle (the words of a pull request's life) alone: not on the store,
// not on the package that speaks to GitHub.
func TestRulesImportsOnlyItsVocabulary(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command on PATH (%v): cannot list rules' dependencies", err)
	}
	const module = "github.com/mergegate/mergegate"
	out, err := exec.Command(goCmd, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./rules: %v\n%s", err, out)
	}
	allowed := map[string]bool{module + "/rules": true, module + "/lifecycle": true}
	for _, pkg := range strings.Fields(string(out)) {
		if (pkg == module || strings.HasPrefix(pkg, module+"/")) && !allowed[pkg] {
			t.Errorf("rules depends on %s: of mergegate's packages, rules may import lifecycle only (move the word it needs into lifecycle)", pkg)
		}
	}
}
