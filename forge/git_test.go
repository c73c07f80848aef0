package forge_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
)

// gitAnswers is an httptest server standing in for GitHub's git and
// merges endpoints with canned answers (status, body), while the fake
// GitHub answers everything else (installation tokens): the forge client
// runs its whole stack against real HTTP.
type gitAnswers struct {
	mu     sync.Mutex
	status int
	body   string
	header map[string]string // sent with every answer
	got    []string          // "METHOD path body"
}

func (g *gitAnswers) set(status int, body string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status, g.body = status, body
}

func (g *gitAnswers) last() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.got) == 0 {
		return ""
	}
	return g.got[len(g.got)-1]
}

func (g *gitAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got = append(g.got, r.Method+" "+r.URL.EscapedPath()+" "+strings.TrimSpace(string(b)))
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	for k, v := range g.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(g.status)
	io.WriteString(w, g.body)
}

// splitTransport sends the git, merges, contents and GraphQL requests to
// git, the others on.
type splitTransport struct {
	git  *url.URL
	next http.RoundTripper
}

func (t splitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "/git/") || strings.HasSuffix(req.URL.Path, "/merges") || strings.Contains(req.URL.Path, "/contents/") ||
		strings.HasSuffix(req.URL.Path, "/graphql") {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host = t.git.Scheme, t.git.Host
	}
	return t.next.RoundTrip(req)
}

func newGitEnv(t *testing.T) (*forge.Client, *gitAnswers, *fakegithub.Server) {
	t.Helper()
	gh := fakegithub.New(t)
	gh.AddRepo(tenant, repo, "main")
	answers := &gitAnswers{}
	srv := httptest.NewServer(answers)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	c := testkit.Forge(t, gh, forge.Config{Transport: splitTransport{git: u, next: http.DefaultTransport}})
	return c, answers, gh
}

const (
	shaA = "aa218f56b14c9653891f9e74264a383fa43fefbd"
	shaT = "b4eecafa9be2f2006ce1b709d6857b07069b4608"
)

// GitHub's answers, in its shapes and words, come out as the typed
// results and sentinels the train engine tests for.
func TestGitCallsSortGitHubAnswers(t *testing.T) {
	c, g, _ := newGitEnv(t)
	ctx := t.Context()
	refBody := `{"ref":"refs/heads/main","node_id":"MDM6UmVmcmVmcy9oZWFkcy9mZWF0dXJlQQ==","url":"https://api.github.com/repos/octo/widgets/git/refs/heads/main","object":{"type":"commit","sha":"` + shaA + `","url":"https://api.github.com/repos/octo/widgets/git/commits/` + shaA + `"}}`
	errBody := func(msg string) string {
		return `{"message":"` + msg + `","documentation_url":"https://docs.github.com/rest/git/refs"}`
	}

	t.Run("BranchHead", func(t *testing.T) {
		g.set(200, refBody)
		sha, err := c.BranchHead(ctx, tenant, repo, "mergegate/main/7")
		if err != nil || sha != shaA {
			t.Fatalf("BranchHead = %q, %v", sha, err)
		}
		if got := g.last(); !strings.HasPrefix(got, "GET /repos/octo/widgets/git/ref/heads/mergegate/main/7") {
			t.Errorf("request = %s", got)
		}
		g.set(404, errBody("Not Found"))
		_, err = c.BranchHead(ctx, tenant, repo, "gone")
		if !errors.Is(err, forge.ErrNotFound) || !forge.IsNotFound(err) || forge.IsRetryable(err) {
			t.Errorf("404: %v (want ErrNotFound, final)", err)
		}
	})

	t.Run("CreateBranch", func(t *testing.T) {
		g.set(201, refBody)
		if err := c.CreateBranch(ctx, tenant, repo, "mergegate/main/7", shaA); err != nil {
			t.Fatal(err)
		}
		if got := g.last(); got != `POST /repos/octo/widgets/git/refs {"ref":"refs/heads/mergegate/main/7","sha":"`+shaA+`"}` {
			t.Errorf("request = %s", got)
		}
		g.set(422, errBody("Reference already exists"))
		if err := c.CreateBranch(ctx, tenant, repo, "mergegate/main/7", shaA); !errors.Is(err, forge.ErrRefExists) {
			t.Errorf("422 Reference already exists: %v", err)
		}
		g.set(422, errBody("Object does not exist"))
		if err := c.CreateBranch(ctx, tenant, repo, "x", shaA); err == nil || errors.Is(err, forge.ErrRefExists) {
			t.Errorf("422 Object does not exist: %v", err)
		}
	})

	t.Run("SetBranch", func(t *testing.T) {
		g.set(200, refBody)
		if err := c.SetBranch(ctx, tenant, repo, "main", shaA, false); err != nil {
			t.Fatal(err)
		}
		if got := g.last(); got != `PATCH /repos/octo/widgets/git/refs/heads/main {"sha":"`+shaA+`","force":false}` {
			t.Errorf("request = %s", got)
		}
		g.set(422, errBody("Update is not a fast forward"))
		err := c.SetBranch(ctx, tenant, repo, "main", shaA, false)
		if !errors.Is(err, forge.ErrNotFastForward) || errors.Is(err, forge.ErrProtectedBranch) {
			t.Errorf("not a fast forward: %v", err)
		}
		for _, msg := range []string{
			"Protected branch update failed for refs/heads/main.",
			`Required status check \"ci\" is expected.`,
			"2 of 2 required status checks are expected.",
			"Changes must be made through a pull request.",
			"Cannot force-push to a protected branch",
			"Changes must be made through the merge queue",
		} {
			g.set(422, errBody(msg))
			err := c.SetBranch(ctx, tenant, repo, "main", shaA, false)
			var pe *forge.ProtectedBranchError
			if !errors.Is(err, forge.ErrProtectedBranch) || !errors.As(err, &pe) || pe.Branch != "main" || pe.Message != strings.ReplaceAll(msg, `\"`, `"`) {
				t.Errorf("%s: %v", msg, err)
			}
			if errors.Is(err, forge.ErrNotFastForward) || forge.IsRetryable(err) {
				t.Errorf("%s: sorted as %v", msg, err)
			}
		}
	})

	t.Run("MergeBranch", func(t *testing.T) {
		g.set(201, `{"sha":"`+shaA+`","node_id":"C_1","commit":{"message":"Merge #7","tree":{"sha":"`+shaT+`","url":"u"}},"parents":[{"sha":"`+shaT+`"},{"sha":"`+shaA+`"}]}`)
		res, err := c.MergeBranch(ctx, tenant, repo, "mergegate/main/7", "feature-7", "Merge #7")
		if err != nil || res.SHA != shaA || res.TreeSHA != shaT || !slices.Equal(res.Parents, []string{shaT, shaA}) {
			t.Fatalf("201: %+v %v", res, err)
		}
		if got := g.last(); got != `POST /repos/octo/widgets/merges {"base":"mergegate/main/7","head":"feature-7","commit_message":"Merge #7"}` {
			t.Errorf("request = %s", got)
		}
		g.set(204, "")
		if res, err := c.MergeBranch(ctx, tenant, repo, "b", "h", ""); err != nil || !res.UpToDate || res.SHA != "" {
			t.Errorf("204: %+v %v", res, err)
		}
		g.set(409, errBody("Merge conflict"))
		if _, err := c.MergeBranch(ctx, tenant, repo, "b", "h", ""); !errors.Is(err, forge.ErrMergeConflict) || forge.IsRetryable(err) {
			t.Errorf("409: %v", err)
		}
		for _, status := range []int{409, 403} {
			g.set(status, errBody("Repository rule violations found"))
			_, err := c.MergeBranch(ctx, tenant, repo, "b", "h", "")
			var pe *forge.ProtectedBranchError
			if !errors.As(err, &pe) || pe.Branch != "b" || errors.Is(err, forge.ErrMergeConflict) {
				t.Errorf("%d, a ruleset's refusal: %v, want a ProtectedBranchError, not a conflict", status, err)
			}
		}
		g.set(404, errBody("Head does not exist"))
		if _, err := c.MergeBranch(ctx, tenant, repo, "b", "h", ""); !errors.Is(err, forge.ErrNotFound) || errors.Is(err, forge.ErrBaseMissing) {
			t.Errorf("404 for the head: %v, want ErrNotFound only", err)
		}
		g.set(404, errBody("Base does not exist"))
		if _, err := c.MergeBranch(ctx, tenant, repo, "b", "h", ""); !errors.Is(err, forge.ErrBaseMissing) || !errors.Is(err, forge.ErrNotFound) {
			t.Errorf("404 for the base: %v, want ErrBaseMissing (and ErrNotFound)", err)
		}
		g.set(502, errBody("Server Error"))
		if _, err := c.MergeBranch(ctx, tenant, repo, "b", "h", ""); !forge.IsRetryable(err) || errors.Is(err, forge.ErrMergeConflict) {
			t.Errorf("502: %v", err)
		}
	})

	// Over 1 MB GitHub answers the file without its content.
	t.Run("RepoFile over 1 MB", func(t *testing.T) {
		g.set(200, `{"type":"file","encoding":"none","size":2000000,"name":"mergegate.yml","path":".github/mergegate.yml","content":"","sha":"`+shaA+`"}`)
		f, found, err := c.RepoFile(ctx, tenant, repo, ".github/mergegate.yml")
		if !errors.Is(err, forge.ErrFileTooLarge) || !found || f.SHA != shaA || f.Size != 2000000 || f.Content != nil {
			t.Errorf("encoding none: %+v found=%v err=%v", f, found, err)
		}
	})

	// GitHub's GraphQL quota answers 200 with a rate-limit error, its
	// reset in the headers: mergegate waits until then rather than trying
	// again at once. Without the reset it is a transient error, as before.
	// The reference documents type RATE_LIMITED; GitHub sends RATE_LIMIT
	// with code graphql_rate_limit, and x-ratelimit-remaining need not be
	// 0 (octokit/plugin-throttling.js #636, #824).
	for name, body := range map[string]string{
		"RATE_LIMITED": `{"data":null,"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded for installation ID 31337."}]}`,
		"RATE_LIMIT":   `{"data":null,"errors":[{"type":"RATE_LIMIT","code":"graphql_rate_limit","message":"API rate limit already exceeded for installation ID 31337."}]}`,
	} {
		t.Run("GraphQL "+name, func(t *testing.T) {
			reset := time.Now().Add(20 * time.Minute).Truncate(time.Second)
			g.set(200, body)
			g.mu.Lock()
			g.header = map[string]string{"X-Ratelimit-Resource": "graphql", "X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": strconv.FormatInt(reset.Unix(), 10)}
			g.mu.Unlock()
			_, err := c.RebaseBranch(ctx, tenant, repo, 7, "PR_7", "")
			if rl, ok := forge.IsRateLimited(err); !ok || !rl.RetryAt.Equal(reset) {
				t.Errorf("%s with a reset: %v, want a rate limit until %s", name, err, reset)
			}
			_, err = c.EnqueuePR(ctx, tenant, repo, 7, "PR_7", shaA)
			if rl, ok := forge.IsRateLimited(err); !ok || !rl.RetryAt.Equal(reset) {
				t.Errorf("%s on an enqueue: %v, want a rate limit until %s, not a refusal", name, err, reset)
			}
			g.mu.Lock()
			g.header = nil
			g.mu.Unlock()
			_, err = c.RebaseBranch(ctx, tenant, repo, 7, "PR_7", "")
			if _, ok := forge.IsRateLimited(err); ok || !forge.IsTransient(err) {
				t.Errorf("%s without a reset: %v, want a transient error", name, err)
			}
		})
	}

	t.Run("CommitTree", func(t *testing.T) {
		g.set(200, `{"sha":"`+shaA+`","node_id":"C_1","tree":{"sha":"`+shaT+`","url":"u"},"parents":[],"message":"m"}`)
		tree, err := c.CommitTree(ctx, tenant, repo, shaA)
		if err != nil || tree != shaT {
			t.Fatalf("CommitTree = %q, %v", tree, err)
		}
		if got := g.last(); !strings.HasPrefix(got, "GET /repos/octo/widgets/git/commits/"+shaA) {
			t.Errorf("request = %s", got)
		}
		g.set(404, errBody("Not Found"))
		if _, err := c.CommitTree(ctx, tenant, repo, shaA); !errors.Is(err, forge.ErrNotFound) {
			t.Errorf("404: %v", err)
		}
	})

	// Every call is counted under its own operation name (the metric's
	// operation label).
	for _, op := range []string{"git.get-ref", "git.create-ref", "git.update-ref", "repos.merge", "git.get-commit"} {
		if c.EndpointStats()[op].Requests == 0 {
			t.Errorf("no requests counted for %s: %v", op, c.EndpointStats())
		}
	}
}

// The go-github client against the fake GitHub's git model: a train built,
// landed by fast-forward, GitHub's refusals typed.
func TestGitCallsAgainstTheFake(t *testing.T) {
	e := newEnv(t, envOpts{})
	ctx := e.ctx
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 2, HeadSHA: "h2"})
	e.gh.AddPR(repo, fakegithub.PR{Number: 3, HeadSHA: "h3", Files: map[string]string{"pr/1.txt": "not 1's\n"}})
	const train = "mergegate/main/1"

	base, err := e.c.BranchHead(ctx, tenant, repo, "main")
	if err != nil || len(base) != 40 {
		t.Fatalf("BranchHead(main) = %q, %v", base, err)
	}
	if _, err := e.c.BranchHead(ctx, tenant, repo, train); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("BranchHead of a missing branch: %v", err)
	}
	if err := e.c.CreateBranch(ctx, tenant, repo, train, base); err != nil {
		t.Fatal(err)
	}
	if err := e.c.CreateBranch(ctx, tenant, repo, train, base); !errors.Is(err, forge.ErrRefExists) {
		t.Errorf("CreateBranch again: %v", err)
	}
	// Matching refs: a prefix lists what starts with it, none an empty
	// array (not an error).
	if err := e.c.CreateBranch(ctx, tenant, repo, "mergegate-build/main/train", base); err != nil {
		t.Fatal(err)
	}
	if got, err := e.c.Branches(ctx, tenant, repo, "mergegate"); err != nil || !slices.Equal(got, []string{"mergegate-build/main/train", train}) {
		t.Errorf("Branches(mergegate) = %v, %v", got, err)
	}
	if got, err := e.c.Branches(ctx, tenant, repo, "nothing/"); err != nil || len(got) != 0 {
		t.Errorf("Branches(nothing/) = %v, %v", got, err)
	}
	// GitHub's merge into a branch created a moment before may not find
	// it yet (the fake's one stale read after a write); a moment later it
	// does.
	if _, err := e.c.MergeBranch(ctx, tenant, repo, train, "h1", ""); !errors.Is(err, forge.ErrBaseMissing) || !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("MergeBranch into the branch just created: %v, want ErrBaseMissing", err)
	}
	var tip forge.MergeResult
	prev := base
	for _, hh := range [][2]string{{"h1", "h1"}, {"feature-2", "h2"}} {
		h, head := hh[0], hh[1]
		if tip, err = e.c.MergeBranch(ctx, tenant, repo, train, h, "Merge "+h); err != nil || tip.UpToDate || tip.SHA == "" {
			t.Fatalf("MergeBranch %s: %+v %v", h, tip, err)
		}
		// GitHub answers the merge commit with its parents: the tip it
		// merged into, then the head.
		if pr := e.gh.Parents(repo, tip.SHA); !slices.Equal(tip.Parents, pr) || !slices.Equal(pr, []string{prev, head}) {
			t.Errorf("MergeBranch %s: parents %v, the fake's %v, want [%s, the head]", h, tip.Parents, pr, prev)
		}
		prev = tip.SHA
	}
	if res, err := e.c.MergeBranch(ctx, tenant, repo, train, "h1", ""); err != nil || !res.UpToDate {
		t.Errorf("MergeBranch of a merged head: %+v %v", res, err)
	}
	if _, err := e.c.MergeBranch(ctx, tenant, repo, train, "h3", ""); !errors.Is(err, forge.ErrMergeConflict) {
		t.Errorf("MergeBranch of a conflicting head: %v", err)
	}
	if _, err := e.c.MergeBranch(ctx, tenant, repo, "nope", "h1", ""); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("MergeBranch into a missing base: %v", err)
	}
	if tree, err := e.c.CommitTree(ctx, tenant, repo, tip.SHA); err != nil || tree != tip.TreeSHA || tree != e.gh.TreeOf(repo, tip.SHA) {
		t.Errorf("CommitTree = %q, %v; merge said %q, the fake %q", tree, err, tip.TreeSHA, e.gh.TreeOf(repo, tip.SHA))
	}
	if got, err := e.c.BranchHead(ctx, tenant, repo, train); err != nil || got != tip.SHA {
		t.Errorf("BranchHead(train) = %q, %v; want %s", got, err, tip.SHA)
	}

	// Landing: a protected main refuses, then lets the App through.
	e.gh.SetRequiredReviews(repo, "main", 1, false)
	err = e.c.SetBranch(ctx, tenant, repo, "main", tip.SHA, false)
	var pe *forge.ProtectedBranchError
	if !errors.Is(err, forge.ErrProtectedBranch) || !errors.As(err, &pe) || pe.Message != fakegithub.MsgPushNeedsPR {
		t.Errorf("SetBranch on a protected main: %v", err)
	}
	e.gh.AllowPush(repo, "main")
	if err := e.c.SetBranch(ctx, tenant, repo, "main", tip.SHA, false); err != nil {
		t.Fatalf("SetBranch fast-forward: %v", err)
	}
	if err := e.c.SetBranch(ctx, tenant, repo, "main", "h3", false); !errors.Is(err, forge.ErrNotFastForward) {
		t.Errorf("SetBranch to a sha beside main: %v", err)
	}
	for n, merged := range map[int]bool{1: true, 2: true, 3: false} {
		if pr, err := e.c.GetPR(ctx, tenant, repo, n); err != nil || pr.Merged != merged {
			t.Errorf("PR %d after landing: merged %v, %v; want %v", n, pr.Merged, err, merged)
		}
	}
	if err := e.c.DeleteBranch(ctx, tenant, repo, train); err != nil {
		t.Errorf("DeleteBranch: %v", err)
	}
	if err := e.c.SetBranch(ctx, tenant, repo, train, tip.SHA, true); err == nil || forge.IsRetryable(err) {
		t.Errorf("SetBranch of a deleted branch: %v", err)
	}
}

// An outage on a git call is retryable and did nothing, or (a lost
// answer) did its work: the caller reads the branch again before
// repeating it.
func TestGitCallsOutage(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.SetStaleRefReads(0) // the outage's effect, read at once
	ctx := e.ctx
	e.gh.AddPR(repo, fakegithub.PR{Number: 1, HeadSHA: "h1"})
	base, _ := e.c.BranchHead(ctx, tenant, repo, "main")
	if err := e.c.CreateBranch(ctx, tenant, repo, "mergegate/main/1", base); err != nil {
		t.Fatal(err)
	}
	e.gh.Fail(fakegithub.RouteMergeBranch, 1, fakegithub.FaultStatus(502, "Server Error"))
	if _, err := e.c.MergeBranch(ctx, tenant, repo, "mergegate/main/1", "h1", ""); !forge.IsRetryable(err) || errors.Is(err, forge.ErrMergeConflict) {
		t.Errorf("502: %v", err)
	}
	if got, _ := e.c.BranchHead(ctx, tenant, repo, "mergegate/main/1"); got != base {
		t.Errorf("the refused merge moved the branch to %s", got)
	}
	e.gh.Fail(fakegithub.RouteMergeBranch, 1, fakegithub.FaultLostAnswer(502))
	if _, err := e.c.MergeBranch(ctx, tenant, repo, "mergegate/main/1", "h1", ""); !forge.IsRetryable(err) {
		t.Errorf("lost answer: %v", err)
	}
	tip, _ := e.c.BranchHead(ctx, tenant, repo, "mergegate/main/1")
	if got := e.gh.Contains(repo, tip); len(got) != 1 || got[0] != 1 {
		t.Errorf("after the lost answer the branch holds %v, want [1]", got)
	}
	if res, err := e.c.MergeBranch(ctx, tenant, repo, "mergegate/main/1", "h1", ""); err != nil || !res.UpToDate {
		t.Errorf("merging again: %+v %v (want 204: already in)", res, err)
	}
}

// A secondary limit on the GraphQL endpoint comes as on REST (403 or 429,
// retry-after), with the GraphQL quota's headers: it is the installation's
// secondary limit, not a refusal of the enqueue.
func TestGraphQLSecondaryLimitIsTheInstallations(t *testing.T) {
	c, g, _ := newGitEnv(t)
	ctx := t.Context()
	g.set(403, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/graphql/overview/rate-limits-and-node-limits-for-the-graphql-api#secondary-rate-limits"}`)
	g.mu.Lock()
	g.header = map[string]string{"X-Ratelimit-Resource": "graphql", "X-Ratelimit-Remaining": "4000", "X-Ratelimit-Reset": strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10), "Retry-After": "60"}
	g.mu.Unlock()
	_, err := c.EnqueuePR(ctx, tenant, repo, 7, "PR_7", shaA)
	if rl, ok := forge.IsRateLimited(err); !ok || !rl.Secondary {
		t.Errorf("a secondary limit on an enqueue: %v, want the installation's secondary limit", err)
	}
	g.set(200, `{"ref":"refs/heads/main","object":{"type":"commit","sha":"`+shaA+`"}}`)
	if _, err := c.BranchHead(ctx, tenant, repo, "main"); err == nil {
		t.Errorf("a REST read within the secondary limit's minute was sent")
	} else if rl, ok := forge.IsRateLimited(err); !ok || !rl.Secondary {
		t.Errorf("a REST read within the secondary limit's minute: %v, want it held back", err)
	}
}
