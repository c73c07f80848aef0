package forge

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
)

// githubListing builds GET /repos/{o}/{r}/pulls as GitHub answers it for n
// open pull requests of one repository, minified: GitHub's own example
// (testdata/github-rest/pulls_list.200.json, ~21 KB a PR) varied per PR the
// way real listings vary (number and URLs, ids, title, a body of a few
// hundred words, one of 8 authors, branch, head and merge SHAs, times,
// labels, reviewers). head.repo and base.repo stay the same repository, as
// for branches of one repository. Deterministic.
func githubListing(tb testing.TB, n int) []byte {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "github-rest", "pulls_list.200.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var tmpl []json.RawMessage
	if err := json.Unmarshal(raw, &tmpl); err != nil {
		tb.Fatal(err)
	}
	var base map[string]any
	if err := json.Unmarshal(tmpl[0], &base); err != nil {
		tb.Fatal(err)
	}
	userJSON, _ := json.Marshal(base["user"])
	rng := rand.New(rand.NewPCG(1, 2))
	sha := func() string {
		const hexd = "0123456789abcdef"
		b := make([]byte, 40)
		for i := range b {
			b[i] = hexd[rng.IntN(16)]
		}
		return string(b)
	}
	words := strings.Fields("the a merge queue fix add remove update test build release config handler cache request response error retry limit token webhook label check status branch commit refactor docs bump dependency version api client server timeout context")
	text := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		return b.String()
	}
	user := func(i int) any {
		login := fmt.Sprintf("dev-%d", i)
		s := strings.ReplaceAll(string(userJSON), "octocat", login)
		s = strings.Replace(s, `"id":1,`, fmt.Sprintf(`"id":%d,`, 58000+i*977), 1)
		var u any
		json.Unmarshal([]byte(s), &u)
		return u
	}
	baseSHA := sha()
	t0 := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	var out []any
	for i := 0; i < n; i++ {
		num := 4100 + i*3
		s := strings.ReplaceAll(string(tmpl[0]), "1347", fmt.Sprint(num))
		head := sha()
		s = strings.ReplaceAll(s, "6dcb09b5b57875f334f61aebed695e2e4193db5e", head)
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			tb.Fatal(err)
		}
		author := rng.IntN(8)
		m["id"] = 1_900_000_000 + rng.IntN(100_000_000)
		m["node_id"] = fmt.Sprintf("PR_kwDO%08x%08x", rng.Uint32(), rng.Uint32())
		m["title"] = text(4 + rng.IntN(6))
		m["body"] = text(50 + rng.IntN(300))
		m["user"] = user(author)
		m["assignee"] = user(author)
		m["assignees"] = []any{user(author)}
		m["requested_reviewers"] = []any{user((author + 1) % 8), user((author + 3) % 8)}
		m["merge_commit_sha"] = sha()
		at := t0.Add(time.Duration(rng.IntN(30*24*3600)) * time.Second)
		m["created_at"] = at.Format(time.RFC3339)
		m["updated_at"] = at.Add(time.Duration(rng.IntN(3*24*3600)) * time.Second).Format(time.RFC3339)
		m["closed_at"], m["merged_at"], m["milestone"], m["active_lock_reason"] = nil, nil, nil, nil
		m["locked"] = false
		if i%2 == 1 {
			m["labels"] = []any{}
		}
		h := m["head"].(map[string]any)
		ref := strings.ReplaceAll(text(3), " ", "-")
		h["ref"], h["label"], h["user"] = ref, fmt.Sprintf("dev-%d:%s", author, ref), user(author)
		m["base"].(map[string]any)["sha"] = baseSHA
		out = append(out, m)
	}
	b, err := json.Marshal(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fakeListing is the fake GitHub's answer for 20 PRs (as the scale test
// lists them), captured through a forge client.
func fakeListing(tb testing.TB) []byte {
	tb.Helper()
	e := newFakeEnv(tb, 0, 0)
	e.gh.AddRepo("500", "org500/repo-000", "main")
	for n := 1; n <= 20; n++ {
		e.gh.AddPR("org500/repo-000", fakePR(n, nil))
	}
	if _, err := e.c.ListOpenPRs(e.ctx, "500", "org500/repo-000"); err != nil {
		tb.Fatal(err)
	}
	for _, el := range e.c.cache.entries {
		b, err := el.Value.(*cacheEntry).decodeBody()
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	tb.Fatal("nothing cached")
	return nil
}

// BenchmarkCacheS2 measures what compression costs and saves on PR listings
// of 20 PRs: s2.Encode on a 200 (newCacheEntry) and s2.Decode on a 304.
func BenchmarkCacheS2(b *testing.B) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"github-20PRs", githubListing(b, 20)},
		{"fake-20PRs", fakeListing(b)},
	} {
		enc := s2.Encode(nil, c.body)
		ratio := float64(len(c.body)) / float64(len(enc))
		b.Run(c.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				newCacheEntry("k", http.Header{}, c.body)
			}
			b.ReportMetric(float64(len(c.body)), "raw-B")
			b.ReportMetric(float64(len(enc)), "s2-B")
			b.ReportMetric(ratio, "ratio")
		})
		b.Run(c.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s2.Decode(nil, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The same into a reused buffer: the decoding alone, without the
		// allocation of the body (which a 304 needs, go-github reads it).
		b.Run(c.name+"/decode-reuse", func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			dst := make([]byte, len(c.body))
			for b.Loop() {
				if _, err := s2.Decode(dst, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// notModifiedTransport answers every request 304.
type notModifiedTransport struct{}

func (notModifiedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusNotModified, Header: http.Header{"Etag": {`"x"`}, "X-Ratelimit-Remaining": {"4999"}},
		Body: http.NoBody, Request: req}, nil
}

// BenchmarkCache304 is the whole revalidation path of a cached 20-PR
// GitHub listing, the network aside: lookup, conditional request, decode,
// the rebuilt 200 read to the end.
func BenchmarkCache304(b *testing.B) {
	body := githubListing(b, 20)
	c := newETagCache(0, 0)
	t := &cacheTransport{inst: "1", cache: c, next: notModifiedTransport{}}
	req, _ := http.NewRequest(http.MethodGet, "https://api.github.com/repos/o/r/pulls?per_page=100&state=open", nil)
	key := t.inst + " " + req.URL.String() + " "
	c.put(newCacheEntry(key, http.Header{"Etag": {`"x"`}, "Content-Type": {"application/json; charset=utf-8"}}, body), false)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		resp, err := t.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatal(resp, err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		if n != int64(len(body)) {
			b.Fatal(n)
		}
	}
}
