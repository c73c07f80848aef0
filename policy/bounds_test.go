package policy_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mergegate/mergegate/policy"
)

// A YAML syntax error names the 1-based line an editor shows: yaml.v3
// numbers its parser's errors from 0 (and leaves out a 0), its scanner's
// from 1.
func TestYAMLErrorLines(t *testing.T) {
	for _, c := range []struct {
		yml  string
		line int
	}{
		{"- merge_method: squash\nfrozen: true\n", 2},                          // parser: a mapping after a list
		{"merge_method: squash\nblocking_labels: [a, b\nfrozen: true\n", 2},    // parser: the list left open on line 2
		{"frozen: true\nmerge_method: squash\n- a\n", 3},                       // parser: a list item in a mapping
		{"merge_method: squash: rebase\n", 1},                                  // scanner, first line: yaml.v3 says no line
		{"merge_method: squash\nfrozen: @\n", 2},                               // scanner
		{"frozen: true\nmerge_method: squash\n  mode: train\n", 3},             // scanner: a mapping value in the wrong place
		{"merge_method: squash\nbase_branches:\n  main:\n\tfrozen: true\n", 4}, // scanner: a tab
	} {
		_, ps := policy.Parse(name, []byte(c.yml))
		if len(ps) != 1 || !strings.HasPrefix(ps[0].Msg, "not valid YAML: ") || strings.Contains(ps[0].Msg, "line ") {
			t.Errorf("%q: problems %v", c.yml, ps)
			continue
		}
		if ps[0].Line != c.line {
			t.Errorf("%q: line %d, want %d (%s)", c.yml, ps[0].Line, c.line, ps[0].Msg)
		}
	}
}

// Every problem the walk finds has the line and column of its node, as an
// editor counts them (both from 1).
func TestProblemColumns(t *testing.T) {
	_, ps := policy.Parse(name, []byte("merge_method: squash\nbase_branches:\n  main:\n    frozen: maybe\n"))
	if len(ps) != 1 || ps[0].Line != 4 || ps[0].Column != 13 || ps[0].String() != name+`:4:13: base_branches.main.frozen: want true or false, not "maybe"` {
		t.Errorf("problems = %+v", ps)
	}
	// A branch name with dots (release-1.2) is one key, not a path.
	_, ps = policy.Parse(name, []byte("base_branches:\n  release-1.2:\n    merge_method: squish\n"))
	if len(ps) != 1 || ps[0].Line != 3 || ps[0].Column != 19 || ps[0].Key != "base_branches.release-1.2.merge_method" {
		t.Errorf("problems = %+v", ps)
	}
}

// 6,000 unknown keys: the first 50 problems, then one that says how many
// more; a value of 100 KB is quoted by its start. What a check run shows of
// them stays a page.
func TestProblemsCapped(t *testing.T) {
	var b strings.Builder
	for i := range 6000 {
		fmt.Fprintf(&b, "unknown_key_%d: 1\n", i)
	}
	_, ps := policy.Parse(name, []byte(b.String()))
	if len(ps) != policy.MaxProblems+1 {
		t.Fatalf("%d problems, want %d", len(ps), policy.MaxProblems+1)
	}
	if ps[0].Line != 1 || ps[49].Line != 50 {
		t.Errorf("not the first 50 in line order: %v, %v", ps[0], ps[49])
	}
	if last := ps[policy.MaxProblems]; last.Line != 0 || last.More != 5950 || last.Msg != "and 5950 more problems (the first 50 are shown)" {
		t.Errorf("last = %+v", last)
	}
	if ps.Total() != 6000 || len(ps.Listed()) != policy.MaxProblems {
		t.Errorf("Total %d, Listed %d", ps.Total(), len(ps.Listed()))
	}
	total := 0
	for _, p := range ps {
		total += len(p.String())
	}
	if total > 10000 {
		t.Errorf("the problems say %d bytes", total)
	}

	_, ps = policy.Parse(name, []byte("batch_size: "+strings.Repeat("k", 100_000)+"\nfrozen: \""+strings.Repeat("é", 50_000)+"\"\n"))
	if len(ps) != 2 {
		t.Fatalf("problems = %d", len(ps))
	}
	for _, p := range ps {
		if len(p.String()) > 300 || !utf8.ValidString(p.String()) || !strings.Contains(p.Msg, "…") {
			t.Errorf("a long value is quoted whole or cut inside a character: %d bytes, %.120q", len(p.String()), p.String())
		}
	}
}

// A pattern is at most 1 KiB and compiled once per file: every policy of
// the file shares the one compiled expression.
func TestBlockingTitleBounded(t *testing.T) {
	e := parse(t, "blocking_title: \"^(WIP|Draft)\\\\b\"\n")
	a, b := e.For("main").BlockingTitle, e.For("release").BlockingTitle
	if a == nil || a != b || !a.MatchString("WIP: x") {
		t.Errorf("compiled %p and %p: want one expression, compiled by Parse", a, b)
	}
	_, ps := policy.Parse(name, []byte("blocking_title: \""+strings.Repeat("a", policy.MaxPattern+1)+"\"\n"))
	if len(ps) != 1 || ps[0].Msg != "blocking_title is 1025 bytes long: at most 1024 (a pattern of a title is a few words)" || ps[0].Line != 1 {
		t.Errorf("a pattern of 1025 bytes: %v", ps)
	}
	parse(t, "blocking_title: \""+strings.Repeat("a", policy.MaxPattern)+"\"\n")
	// Short, but a program of 200,000 steps: 16 ms per title matched.
	_, ps = policy.Parse(name, []byte(`blocking_title: "`+strings.Repeat(`\\pL{1,999}`, 100)+`"`+"\n"))
	if len(ps) != 1 || !strings.HasPrefix(ps[0].Msg, "blocking_title compiles to ") || !strings.HasSuffix(ps[0].Msg, "steps: at most 5000 (repetitions such as {1,999} multiply a pattern)") {
		t.Errorf("a pattern of 200,000 steps: %v", ps)
	}
	parse(t, `blocking_title: "^(WIP|Draft|DO NOT MERGE)\\b|\\[skip queue\\]"`+"\n")
}

// A template is at most 8 KiB, and a rendered title or message at most
// 65,536 bytes however many times it names the body: rendering stops
// there, at a character's start.
func TestTemplateBounded(t *testing.T) {
	_, ps := policy.Parse(name, []byte("merge_commit:\n  message: \""+strings.Repeat("{body}", policy.MaxTemplate/6+1)+"\"\n"))
	if len(ps) != 1 || !strings.Contains(ps[0].Msg, "merge_commit.message: the template is 8196 bytes long: at most 8192") {
		t.Errorf("a template over 8 KiB: %v", ps)
	}
	tpl := strings.Repeat("{body}", policy.MaxTemplate/6)
	if _, ps := policy.Parse(name, []byte("merge_commit:\n  message: \""+tpl+"\"\n")); len(ps) != 0 {
		t.Fatalf("a template of 8 KiB: %v", ps)
	}
	out := policy.Render(tpl, policy.CommitInfo{Body: strings.Repeat("ü", 30_000)})
	if len(out) > policy.MaxCommitMessage || len(out) < policy.MaxCommitMessage-1 || !utf8.ValidString(out) {
		t.Errorf("rendered %d bytes (valid UTF-8: %v), want at most %d", len(out), utf8.ValidString(out), policy.MaxCommitMessage)
	}
}
