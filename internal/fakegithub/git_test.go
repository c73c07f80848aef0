package fakegithub_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// manualClock is a clock a test moves by hand.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func (c *manualClock) Add(d time.Duration) { c.Set(c.Now().Add(d)) }

func newGitServer(t *testing.T) (*fakegithub.Server, *client, *manualClock) {
	t.Helper()
	clk := &manualClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	// The git model under test, read after each write: replicas that lag
	// are TestStaleRefReads'.
	s := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now, StaleRefReads: -1})
	s.AddRepo(tenant, "octo/r", "main")
	return s, newClient(t, s), clk
}

// localFixture is one of this package's own copies of GitHub's examples
// (testdata/github-rest here; see its NOTICE.md).
func localFixture(t *testing.T, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "github-rest", name))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func message(v any) string {
	m, _ := v.(map[string]any)
	s, _ := m["message"].(string)
	return s
}

func str(v any, path ...string) string {
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	s, _ := v.(string)
	return s
}

// Every git route answers in GitHub's shapes, with its status codes and
// its words, the awkward ones included.
func TestGitRoutesAnswerLikeGitHub(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "h2"})
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	do := func(method, path string, body any) (int, http.Header, any) {
		t.Helper()
		return c.do(method, path, tok, body, nil)
	}

	// GET .../git/ref/heads/<b>: a branch, a PR's head branch; 404 else.
	st, v := c.get("repos/octo/r/git/ref/heads/main")
	if st != 200 || str(v, "ref") != "refs/heads/main" || str(v, "object", "sha") != main || str(v, "object", "type") != "commit" {
		t.Errorf("GET ref main: %d %v", st, v)
	}
	has(t, "git-ref", v, "ref", "node_id", "url", "object.sha", "object.type", "object.url")
	if st, v := c.get("repos/octo/r/git/ref/heads/feature-1"); st != 200 || str(v, "object", "sha") != "h1" {
		t.Errorf("GET ref of PR 1's head: %d %v", st, v)
	}
	if st, v := c.get("repos/octo/r/git/ref/heads/nope"); st != 404 || message(v) != "Not Found" {
		t.Errorf("GET missing ref: %d %v", st, v)
	}

	// POST .../git/refs.
	st, hdr, v := do("POST", "repos/octo/r/git/refs", map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main})
	if st != 201 || str(v, "ref") != "refs/heads/mergegate/main/1" || !strings.HasSuffix(hdr.Get("Location"), "/git/refs/heads/mergegate/main/1") {
		t.Errorf("create ref: %d %v %v", st, v, hdr)
	}
	for _, c := range []struct {
		body map[string]string
		msg  string
	}{
		{map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, fakegithub.MsgRefExists},
		{map[string]string{"ref": "refs/heads/feature-2", "sha": main}, fakegithub.MsgRefExists},
		{map[string]string{"ref": "refs/heads/x", "sha": "0123456789012345678901234567890123456789"}, fakegithub.MsgObjectMissing},
		{map[string]string{"ref": "heads/x", "sha": main}, "Validation Failed"},
	} {
		if st, _, v := do("POST", "repos/octo/r/git/refs", c.body); st != 422 || message(v) != c.msg {
			t.Errorf("create %v: %d %v, want 422 %q", c.body, st, v, c.msg)
		}
	}

	// POST .../merges: 201 with the merge commit (GitHub's commit shape),
	// 204 when there is nothing to merge, 404 for a missing base or head.
	st, _, v = do("POST", "repos/octo/r/merges", map[string]string{"base": "mergegate/main/1", "head": "h1", "commit_message": "Merge #1"})
	if st != 201 || str(v, "commit", "message") != "Merge #1" || len(str(v, "sha")) != 40 {
		t.Fatalf("merge: %d %v", st, v)
	}
	merged := str(v, "sha")
	subShape(t, "merges 201", v, localFixture(t, "repos_get-branch.200.json").(map[string]any)["commit"])
	has(t, "merges 201", v, "sha", "commit.tree.sha", "parents.sha", "html_url")
	if ps := v.(map[string]any)["parents"].([]any); len(ps) != 2 || str(ps[0], "sha") != main || str(ps[1], "sha") != "h1" {
		t.Errorf("merge parents = %v, want [%s h1]", ps, main)
	}
	if st, _, v := do("POST", "repos/octo/r/merges", map[string]string{"base": "mergegate/main/1", "head": "feature-1"}); st != 204 || v != nil {
		t.Errorf("merge again: %d %v, want 204 and no body", st, v)
	}
	if st, _, v := do("POST", "repos/octo/r/merges", map[string]string{"base": "nope", "head": "h1"}); st != 404 || message(v) != fakegithub.MsgBaseMissing {
		t.Errorf("merge into a missing base: %d %v", st, v)
	}
	if st, _, v := do("POST", "repos/octo/r/merges", map[string]string{"base": "mergegate/main/1", "head": "nope"}); st != 404 || message(v) != fakegithub.MsgHeadMissing {
		t.Errorf("merge of a missing head: %d %v", st, v)
	}

	// GET .../git/commits/{sha}: the tree and the parents.
	st, v = c.get("repos/octo/r/git/commits/" + merged)
	if st != 200 || str(v, "tree", "sha") != s.TreeOf("octo/r", merged) || str(v, "sha") != merged {
		t.Errorf("GET commit: %d %v", st, v)
	}
	has(t, "git-commit", v, "sha", "node_id", "url", "html_url", "author.name", "author.date", "committer.email", "message",
		"tree.sha", "tree.url", "parents.sha", "parents.html_url", "verification.reason")
	if st, v := c.get("repos/octo/r/git/commits/0123456789012345678901234567890123456789"); st != 404 || message(v) != "Not Found" {
		t.Errorf("GET missing commit: %d %v", st, v)
	}

	// PATCH .../git/refs/heads/<b>: fast-forward only unless forced.
	if st, _, v := do("PATCH", "repos/octo/r/git/refs/heads/mergegate/main/1", map[string]any{"sha": "h2"}); st != 422 || message(v) != fakegithub.MsgNotFastForward {
		t.Errorf("non-fast-forward update: %d %v", st, v)
	}
	if st, _, v := do("PATCH", "repos/octo/r/git/refs/heads/main", map[string]any{"sha": merged, "force": false}); st != 200 || str(v, "object", "sha") != merged {
		t.Errorf("fast-forward: %d %v", st, v)
	}
	if st, _, v := do("PATCH", "repos/octo/r/git/refs/heads/mergegate/main/1", map[string]any{"sha": main, "force": true}); st != 200 || str(v, "object", "sha") != main {
		t.Errorf("forced update: %d %v", st, v)
	}
	if st, _, v := do("PATCH", "repos/octo/r/git/refs/heads/nope", map[string]any{"sha": main}); st != 422 || message(v) != fakegithub.MsgRefMissing {
		t.Errorf("update of a missing ref: %d %v", st, v)
	}
	if st, _, v := do("PATCH", "repos/octo/r/git/refs/heads/main", map[string]any{"sha": "0123456789012345678901234567890123456789", "force": true}); st != 422 || message(v) != fakegithub.MsgObjectMissing {
		t.Errorf("update to an unknown sha: %d %v", st, v)
	}

	// DELETE works with the model, and a deleted branch can be created
	// again (a train rebuilt under the same name).
	if st, _, _ := do("DELETE", "repos/octo/r/git/refs/heads/mergegate/main/1", nil); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _ := c.get("repos/octo/r/git/ref/heads/mergegate/main/1"); st != 404 {
		t.Errorf("GET deleted ref: %d", st)
	}
	if st, _, v := do("DELETE", "repos/octo/r/git/refs/heads/mergegate/main/1", nil); st != 422 || message(v) != "Reference does not exist" {
		t.Errorf("delete again: %d %v", st, v)
	}
	if st, _, _ := do("POST", "repos/octo/r/git/refs", map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}); st != 201 {
		t.Errorf("create again: %d", st)
	}
	if st, _, _ := do("DELETE", "repos/octo/r/git/refs/heads/mergegate/main/1", nil); st != 204 {
		t.Errorf("delete the re-created branch: %d", st)
	}

	writes := s.RefWrites()
	var actions []string
	for _, w := range writes {
		actions = append(actions, w.Action+" "+w.Branch)
	}
	want := []string{"create mergegate/main/1", "merge mergegate/main/1", "update main", "update mergegate/main/1",
		"delete mergegate/main/1", "create mergegate/main/1", "delete mergegate/main/1"}
	if !slices.Equal(actions, want) {
		t.Errorf("RefWrites = %v, want %v", actions, want)
	}
	if got := s.BaseHistory("octo/r", "main"); !slices.Equal(got, []string{main, merged}) {
		t.Errorf("BaseHistory(main) = %v", got)
	}
}

// Merges are three-way at file level: two pull requests that touch
// different files merge, two that change one file differently conflict
// (409 on the merges API, 405 and dirty on the PR). Merging A then B
// through the merge API gives the tree of a branch built by merging their
// heads, whatever the method.
func TestMergesAreThreeWay(t *testing.T) {
	for _, method := range []string{"merge", "squash", "rebase"} {
		t.Run(method, func(t *testing.T) {
			s, c, _ := newGitServer(t)
			s.SetFile("octo/r", "README.md", "hello\n")
			s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
			s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "b", Files: map[string]string{"README.md": "hello, b\n"}})
			s.AddPR("octo/r", fakegithub.PR{Number: 3, HeadSHA: "c", Files: map[string]string{"README.md": "hello, c\n"}})
			s.SetMergeableUnknownReads(0)
			main, _ := s.BranchHead("octo/r", "main")
			tok := "token " + c.token

			if got := s.FilesOf("octo/r", "b"); len(got) != 1 || got["README.md"] != "hello, b\n" {
				t.Errorf("PR 2's head = %v", got)
			}
			if got := s.FilesOf("octo/r", "a"); got["pr/1.txt"] == "" || got["README.md"] != "hello\n" {
				t.Errorf("PR 1's head = %v (its own file on the base's files)", got)
			}

			c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
			for _, h := range []string{"a", "b"} {
				if st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": h}, nil); st != 201 {
					t.Fatalf("merge %s: %d %v", h, st, v)
				}
			}
			st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": "c"}, nil)
			if st != 409 || message(v) != fakegithub.MsgMergeConflict {
				t.Errorf("merge c after b: %d %v, want 409 %q", st, v, fakegithub.MsgMergeConflict)
			}
			train, _ := s.BranchHead("octo/r", "mergegate/main/1")
			if got := s.Contains("octo/r", train); !slices.Equal(got, []int{1, 2}) {
				t.Errorf("Contains(train) = %v", got)
			}

			for _, n := range []int{1, 2} {
				sha := map[int]string{1: "a", 2: "b"}[n]
				if st, _, v := c.do("PUT", fmt.Sprintf("repos/octo/r/pulls/%d/merge", n), tok, map[string]string{"sha": sha, "merge_method": method}, nil); st != 200 {
					t.Fatalf("merge PR %d: %d %v", n, st, v)
				}
			}
			tip, _ := s.BranchHead("octo/r", "main")
			if s.TreeOf("octo/r", tip) != s.TreeOf("octo/r", train) || s.TreeOf("octo/r", tip) == "" {
				t.Errorf("main after merging 1 and 2 (%v) is not the train's tree (%v)", s.FilesOf("octo/r", tip), s.FilesOf("octo/r", train))
			}
			parents := s.Parents("octo/r", tip)
			if wantParents := map[string]int{"merge": 2, "squash": 1, "rebase": 1}[method]; len(parents) != wantParents {
				t.Errorf("%s commit's parents = %v", method, parents)
			}
			if got := s.Contains("octo/r", tip); !slices.Equal(got, []int{1, 2}) {
				t.Errorf("Contains(main) = %v", got)
			}

			// PR 3 now conflicts with main: GitHub says so and refuses.
			_, pr := c.get("repos/octo/r/pulls/3")
			if m := pr.(map[string]any); m["mergeable"] != false || m["mergeable_state"] != "dirty" {
				t.Errorf("PR 3: mergeable %v, state %v", m["mergeable"], m["mergeable_state"])
			}
			if st, _, v := c.do("PUT", "repos/octo/r/pulls/3/merge", tok, map[string]string{"sha": "c"}, nil); st != 405 || message(v) != fakegithub.MsgNotMergeable {
				t.Errorf("merge PR 3: %d %v", st, v)
			}
		})
	}
}

// GitHub's commits carry their time: the same merge built twice is two
// commits with one tree, so CI runs on each.
// A merge is a push to its base: a protected base that does not let the
// App push refuses it with the push's reason (409), where a base that
// lets it through takes it.
func TestMergeIntoAProtectedBranchIsRefused(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/train", "sha": main}, nil)
	s.SetRequired("octo/r", "mergegate/main/train", []string{"ci"}, false)
	st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/train", "head": "a"}, nil)
	if want := fmt.Sprintf(fakegithub.MsgRequiredCheckExpectedFormat, "ci"); st != 409 || message(v) != want {
		t.Errorf("merge into a branch requiring ci: %d %v, want 409 %q", st, v, want)
	}
	s.AllowPush("octo/r", "mergegate/main/train")
	if st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/train", "head": "a"}, nil); st != 201 {
		t.Errorf("merge once the App may push: %d %v", st, v)
	}
}

func TestRebuiltMergeIsANewCommit(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "a"})
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	var shas []string
	for _, b := range []string{"mergegate/main/1", "mergegate/main/2"} {
		c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/" + b, "sha": main}, nil)
		_, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": b, "head": "a"}, nil)
		shas = append(shas, str(v, "sha"))
	}
	if shas[0] == shas[1] || s.TreeOf("octo/r", shas[0]) != s.TreeOf("octo/r", shas[1]) {
		t.Errorf("two builds: %v, trees %s %s", shas, s.TreeOf("octo/r", shas[0]), s.TreeOf("octo/r", shas[1]))
	}
}

// A base that moves to a commit holding pull requests' heads merges them,
// as GitHub does after a push; the others fall behind.
func TestFastForwardedBaseMergesItsPullRequests(t *testing.T) {
	s, c, _ := newGitServer(t)
	for n := 1; n <= 3; n++ {
		s.AddPR("octo/r", fakegithub.PR{Number: n, HeadSHA: fmt.Sprintf("h%d", n)})
	}
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
	for _, h := range []string{"h1", "h2"} {
		c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": h}, nil)
	}
	train, _ := s.BranchHead("octo/r", "mergegate/main/1")
	if st, _, v := c.do("PATCH", "repos/octo/r/git/refs/heads/main", tok, map[string]any{"sha": train}, nil); st != 200 {
		t.Fatalf("fast-forward: %d %v", st, v)
	}
	for n := 1; n <= 2; n++ {
		pr, _ := s.PR("octo/r", n)
		if !pr.Merged || pr.State != "closed" || pr.MergeCommitSHA != train || pr.MergedAt.IsZero() {
			t.Errorf("PR %d after the push: %+v", n, pr)
		}
	}
	if pr, _ := s.PR("octo/r", 3); pr.Merged || pr.State != "open" || !pr.Behind {
		t.Errorf("PR 3 after the push: merged %v state %s behind %v", pr.Merged, pr.State, pr.Behind)
	}
	if len(s.Merges()) != 0 {
		t.Errorf("a push recorded merges through the API: %v", s.Merges())
	}
}

// A protected base refuses the App's ref update, in GitHub's words, unless
// the App is on its bypass list; required checks alone let a commit that
// passed them through. Plain branches are never protected.
func TestProtectedBaseRefusesThePush(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "h2"})
	root, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	patch := func(branch, sha string, force bool) (int, string) {
		st, _, v := c.do("PATCH", "repos/octo/r/git/refs/heads/"+branch, tok, map[string]any{"sha": sha, "force": force}, nil)
		return st, message(v)
	}
	if st, msg := patch("main", "h1", false); st != 200 {
		t.Fatalf("unprotected main: %d %q", st, msg)
	}
	main := "h1"
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
	_, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": "h2"}, nil)
	train := str(v, "sha")

	s.SetRequired("octo/r", "main", []string{"ci", "lint"}, true)
	if st, msg := patch("main", train, false); st != 422 || msg != "2 of 2 required status checks are expected." {
		t.Errorf("no checks: %d %q", st, msg)
	}
	s.SetCheckRun("octo/r", train, "ci", "completed", "success")
	if st, msg := patch("main", train, false); st != 422 || msg != `Required status check "lint" is expected.` {
		t.Errorf("one check missing: %d %q", st, msg)
	}
	s.SetRequiredReviews("octo/r", "main", 1, false)
	s.SetCheckRun("octo/r", train, "lint", "completed", "success")
	if st, msg := patch("main", train, false); st != 422 || msg != fakegithub.MsgPushNeedsPR {
		t.Errorf("reviews required: %d %q", st, msg)
	}
	if st, msg := patch("main", root, true); st != 422 || msg != fakegithub.MsgPushForce {
		t.Errorf("forced: %d %q", st, msg)
	}
	s.SetRequiredReviews("octo/r", "main", 0, false)
	s.SetPushRestricted("octo/r", "main", true)
	if st, msg := patch("main", train, false); st != 422 || msg != fakegithub.MsgNotAuthorized {
		t.Errorf("push restricted: %d %q", st, msg)
	}
	s.SetPushRestricted("octo/r", "main", false)
	s.SetMergeQueue("octo/r", "main", true)
	if st, msg := patch("main", train, false); st != 422 || msg != fakegithub.MsgPushMergeQueue {
		t.Errorf("merge queue: %d %q", st, msg)
	}
	s.SetMergeQueue("octo/r", "main", false)
	s.SetLinearHistory("octo/r", "main", true)
	if st, msg := patch("main", train, false); st != 422 || msg != fakegithub.MsgLinearHistory {
		t.Errorf("linear history: %d %q", st, msg)
	}
	if got := s.BaseHistory("octo/r", "main"); !slices.Equal(got, []string{root, main}) {
		t.Errorf("main moved while refused: %v", got)
	}

	s.SetRequiredReviews("octo/r", "main", 2, true)
	s.AllowPush("octo/r", "main")
	if st, msg := patch("main", train, false); st != 200 {
		t.Errorf("on the bypass list: %d %q", st, msg)
	}
	if st, msg := patch("mergegate/main/1", root, true); st != 200 {
		t.Errorf("a plain branch: %d %q", st, msg)
	}
}

// The merge base is the nearest common ancestor: a file changed by X,
// then by Y on the base, merges cleanly with a pull request opened after X
// that holds X's version (from the root it would be a conflict).
func TestMergeBaseIsTheNearest(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.SetMergeableUnknownReads(0)
	tok := "token " + c.token
	merge := func(n int, sha string) {
		t.Helper()
		if st, _, v := c.do("PUT", fmt.Sprintf("repos/octo/r/pulls/%d/merge", n), tok, map[string]string{"sha": sha}, nil); st != 200 {
			t.Fatalf("merge PR %d: %d %v", n, st, v)
		}
	}
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "x", Files: map[string]string{"f": "x\n"}})
	merge(1, "x")
	s.AddPR("octo/r", fakegithub.PR{Number: 2, HeadSHA: "y", Files: map[string]string{"f": "y\n"}})
	s.AddPR("octo/r", fakegithub.PR{Number: 3, HeadSHA: "z", Files: map[string]string{"f": "x\n", "g": "z\n"}})
	merge(2, "y")
	merge(3, "z")
	tip, _ := s.BranchHead("octo/r", "main")
	if got := s.FilesOf("octo/r", tip); got["f"] != "y\n" || got["g"] != "z\n" {
		t.Errorf("main = %v, want f from 2 and g from 3", got)
	}
}

// A long train (deeper than the trees' layers go) and the same pull
// requests merged one by one end with the same files.
func TestLongTrainKeepsEveryFile(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.SetMergeableUnknownReads(0)
	s.SetSecondaryLimits(false) // 160 writes at once: the git model under test, not GitHub's limits (secondary_test.go)
	s.SetFile("octo/r", "README.md", "hello\n")
	const n = 80
	for i := 1; i <= n; i++ {
		s.AddPR("octo/r", fakegithub.PR{Number: i, HeadSHA: fmt.Sprintf("h%d", i)})
	}
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/mergegate/main/1", "sha": main}, nil)
	for i := 1; i <= n; i++ {
		if st, _, v := c.do("POST", "repos/octo/r/merges", tok, map[string]string{"base": "mergegate/main/1", "head": fmt.Sprintf("h%d", i)}, nil); st != 201 {
			t.Fatalf("merge h%d: %d %v", i, st, v)
		}
		if st, _, v := c.do("PUT", fmt.Sprintf("repos/octo/r/pulls/%d/merge", i), tok, map[string]string{"sha": fmt.Sprintf("h%d", i), "merge_method": "squash"}, nil); st != 200 {
			t.Fatalf("merge PR %d: %d %v", i, st, v)
		}
	}
	train, _ := s.BranchHead("octo/r", "mergegate/main/1")
	tip, _ := s.BranchHead("octo/r", "main")
	files := s.FilesOf("octo/r", train)
	if len(files) != n+1 || files["README.md"] != "hello\n" || files["pr/80.txt"] != "pull request 80\n" {
		t.Errorf("train's files: %d, %v", len(files), files)
	}
	if s.TreeOf("octo/r", train) != s.TreeOf("octo/r", tip) {
		t.Errorf("train and main differ: %d and %d files", len(files), len(s.FilesOf("octo/r", tip)))
	}
	if got := s.Contains("octo/r", tip); len(got) != n {
		t.Errorf("main holds %d pull requests, want %d", len(got), n)
	}
}

// GitHub's reads lag its writes (Options.StaleRefReads, 1 by default):
// the first read of a branch after a write sees it as it was, a merge into
// a branch created a moment ago answers 404 "Base does not exist", and
// the next read is current.
func TestStaleRefReads(t *testing.T) {
	clk := &manualClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	s := fakegithub.NewWithOptions(t, fakegithub.Options{Clock: clk.Now})
	s.AddRepo(tenant, "octo/r", "main")
	c := newClient(t, s)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	main, _ := s.BranchHead("octo/r", "main")
	tok := "token " + c.token
	ref := func() (int, string) {
		t.Helper()
		st, v := c.get("repos/octo/r/git/ref/heads/b")
		return st, str(v, "object", "sha")
	}

	if st, _, v := c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/b", "sha": main}, nil); st != 201 {
		t.Fatalf("create: %d %v", st, v)
	}
	merge := map[string]string{"base": "b", "head": "h1"}
	if st, _, v := c.do("POST", "repos/octo/r/merges", tok, merge, nil); st != 404 || message(v) != fakegithub.MsgBaseMissing {
		t.Errorf("merge into the branch just created: %d %v, want 404 %q", st, v, fakegithub.MsgBaseMissing)
	}
	st, _, v := c.do("POST", "repos/octo/r/merges", tok, merge, nil)
	if st != 201 {
		t.Fatalf("the merge again: %d %v", st, v)
	}
	merged := str(v, "sha")
	if st, sha := ref(); st != 200 || sha != main {
		t.Errorf("first read after the merge: %d %s, want the tip before it, %s", st, sha, main)
	}
	if st, sha := ref(); st != 200 || sha != merged {
		t.Errorf("second read: %d %s, want the merge %s", st, sha, merged)
	}
	if st, _, v := c.do("DELETE", "repos/octo/r/git/refs/heads/b", tok, nil, nil); st != 204 {
		t.Fatalf("delete: %d %v", st, v)
	}
	if st, sha := ref(); st != 200 || sha != merged {
		t.Errorf("first read after the deletion: %d %s, want the branch as it was", st, sha)
	}
	if st, _ := ref(); st != 404 {
		t.Errorf("second read after the deletion: %d, want 404", st)
	}

	s.SetStaleRefReads(0)
	c.do("POST", "repos/octo/r/git/refs", tok, map[string]string{"ref": "refs/heads/b", "sha": main}, nil)
	if st, sha := ref(); st != 200 || sha != main {
		t.Errorf("with stale reads off, the read after the creation: %d %s", st, sha)
	}
}

// SetStaleHeadReads: the next reads of the pull request show the head
// before the push, then the head it has.
func TestStaleHeadReads(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.SetHead("octo/r", 1, "h2")
	s.SetStaleHeadReads("octo/r", 1, "h1", 2)
	for i, want := range []string{"h1", "h1", "h2"} {
		_, v := c.get("repos/octo/r/pulls/1")
		if got := v.(map[string]any)["head"].(map[string]any)["sha"]; got != want {
			t.Fatalf("read %d: head %v, want %s", i+1, got, want)
		}
	}
}

// SetStaleCheckReads: the next listings of a commit's check runs show
// them in progress, then as they are.
func TestStaleCheckReads(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.SetCheckRun("octo/r", "h1", "ci", "completed", "success")
	s.SetStaleCheckReads("octo/r", "h1", 1)
	for i, want := range []string{"in_progress", "completed"} {
		_, v := c.get("repos/octo/r/commits/h1/check-runs")
		runs := v.(map[string]any)["check_runs"].([]any)
		if got := runs[0].(map[string]any)["status"]; len(runs) != 1 || got != want {
			t.Fatalf("read %d: %v, want one run %s", i+1, runs, want)
		}
	}
}

// SetStaleReviewReads: the next listings of a pull request's reviews lack
// its last one, then show it.
func TestStaleReviewReads(t *testing.T) {
	s, c, _ := newGitServer(t)
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadSHA: "h1"})
	s.AddReview("octo/r", 1, "alice", "APPROVED")
	s.SetStaleReviewReads("octo/r", 1, 1)
	for i, want := range []int{0, 1} {
		if _, v := c.get("repos/octo/r/pulls/1/reviews"); len(v.([]any)) != want {
			t.Fatalf("read %d: %v, want %d reviews", i+1, v, want)
		}
	}
}
