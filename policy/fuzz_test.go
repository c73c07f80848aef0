package policy_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mergegate/mergegate/policy"
)

// FuzzPolicyFile: whatever a repository's file holds, Parse returns (no
// panic), at most MaxProblems problems and the one that counts the rest,
// each on a line of the file and of bounded length; a file it accepts
// resolves for any base, and its templates render within
// MaxCommitMessage whatever the pull request says.
func FuzzPolicyFile(f *testing.F) {
	for _, seed := range []string{
		"",
		"merge_method: squash\nblocking_labels: [do-not-merge]\n",
		"trigger_labels: [ship-it]\nauto_merge_trigger: false\nlabel_requires_write: true\nblocking_title: \"^WIP\"\npriority_labels: [urgent]\nbranches: [main, \"release-*\"]\n",
		"merge_commit:\n  title: \"{title} (#{number})\"\n  message: \"{body}\\n{co_authors}\"\n",
		"base_branches:\n  release-1.2:\n    frozen: true\n    freeze_message: soon\n    mode: train\n    batch_size: 4\n    check_timeout: 5s\n    update_method: rebase\n",
		"frozen: maybe\ncolour: blue\n- a\n",
		"a: &x [*x, *x]\nb: *x\n",
		"blocking_title: \"(a+)+$\"\n",
		"merge_commit:\n  message: \"{body}{body}{body}{body}{{\"\n",
	} {
		f.Add(seed, "a title", strings.Repeat("body ", 100))
	}
	f.Fuzz(func(t *testing.T, content, title, body string) {
		if len(content) > 64<<10 {
			return
		}
		file, ps := policy.Parse(name, []byte(content))
		// YAML breaks lines at \n, \r\n and a lone \r, as editors do.
		lines := strings.Count(strings.ReplaceAll(strings.ReplaceAll(content, "\r\n", "\n"), "\r", "\n"), "\n") + 2
		if len(ps) > policy.MaxProblems+1 {
			t.Fatalf("%d problems", len(ps))
		}
		for _, p := range ps {
			if p.File != name || p.Line < 0 || p.Line > lines || p.Column < 0 || p.Msg == "" {
				t.Fatalf("problem %+v (the file has %d lines)", p, lines)
			}
			if n := len(p.String()); n > 1024 {
				t.Fatalf("a problem of %d bytes: %.200q", n, p.String())
			}
		}
		if len(ps) > 0 {
			return
		}
		e := policy.Effective{Source: policy.SourceRepo, File: name, Config: file, Defaults: defaults()}
		bases := []string{"main", ""}
		for b := range file.BaseBranches {
			bases = append(bases, b)
		}
		info := policy.CommitInfo{Number: 7, Title: title, Body: strings.Repeat(body, 1+70_000/(len(body)+1)), Author: "a", CoAuthors: []string{"Co-authored-by: B <b@example.com>"}}
		for _, b := range bases {
			p := e.For(b)
			if file.BlockingTitle != nil && *file.BlockingTitle != "" && p.BlockingTitle == nil {
				t.Fatalf("blocking_title %q not compiled", *file.BlockingTitle)
			}
			for _, tpl := range []string{p.CommitTitle, p.CommitMessage} {
				out := policy.Render(tpl, info)
				if len(out) > policy.MaxCommitMessage || (utf8.ValidString(tpl+body+title) && !utf8.ValidString(out)) {
					t.Fatalf("rendered %d bytes (valid UTF-8 %v) of %q", len(out), utf8.ValidString(out), tpl)
				}
			}
		}
		_ = e.Values()
		_ = e.Options()
	})
}
