package forge_test

import (
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// GitHub refuses a check run whose summary is over 65,535 characters
// (422); forge clips every text to its limit first, so a policy file's
// 6,000 problems or a pull request's long body never cost a check run or
// a comment.
func TestTextsAreClippedToGitHubsLimits(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h"})
	long := strings.Repeat("é", 70000) // characters, not bytes
	id, err := e.c.CreateCheckRun(e.ctx, tenant, repo, "h", forge.CheckRun{Status: "in_progress", Title: "t", Summary: long})
	if err != nil {
		t.Fatalf("a 70,000-character summary: %v", err)
	}
	runs := e.gh.CheckRuns()
	got := runs[len(runs)-1]
	if n := len([]rune(got.Summary)); got.ID != id || n > 65535 || !strings.HasSuffix(got.Summary, "(clipped to GitHub's limit)") {
		t.Errorf("summary of %d characters, want at most 65,535 ending with the clipping's note", n)
	}
	if err := e.c.Comment(e.ctx, tenant, repo, 1, strings.Repeat("x", 100000)); err != nil {
		t.Fatalf("a 100,000-character comment: %v", err)
	}
	if c := e.gh.Comments(); len(c) != 1 || len([]rune(c[0].Body)) > 65536 {
		t.Errorf("comment of %d characters, want at most 65,536", len([]rune(c[0].Body)))
	}
}
