package fakegithub_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/fakegithub"
)

// The fields GitHub documents for these answers (docs.github.com: "REST
// API endpoints for repository contents", "Get repository permissions for
// a user", "Create reaction for an issue comment"); no example of them is
// in testdata/github-rest, so the fields are checked by name.
func TestPolicyRouteShapes(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	s.AddPR("octo/r", fakegithub.PR{Number: 1})
	s.SetFile("octo/r", ".github/mergegate.yml", strings.Repeat("merge_method: squash\n", 5))
	s.SetRole("octo/r", "alice", "maintain")
	c := newClient(t, s)

	st, v := c.get("repos/octo/r/contents/.github/mergegate.yml")
	if st != 200 {
		t.Fatalf("contents: %d", st)
	}
	has(t, "contents", v, "type", "encoding", "size", "name", "path", "content", "sha", "url", "git_url", "html_url", "download_url", "_links.self", "_links.git", "_links.html")
	m := v.(map[string]any)
	raw := m["content"].(string)
	for _, line := range strings.Split(strings.TrimSuffix(raw, "\n"), "\n") {
		if len(line) > 60 {
			t.Errorf("a base64 line of %d characters: GitHub wraps at 60", len(line))
		}
	}
	dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(raw, "\n", ""))
	if err != nil || string(dec) != strings.Repeat("merge_method: squash\n", 5) || m["type"] != "file" || m["encoding"] != "base64" {
		t.Errorf("content %q %v, type %v", dec, err, m["type"])
	}
	if st, v := c.get("repos/octo/r/contents/.github/missing.yml"); st != 404 || v.(map[string]any)["message"] != "Not Found" {
		t.Errorf("a missing file: %d %v", st, v)
	}

	st, v = c.get("repos/octo/r/collaborators/alice/permission")
	if st != 200 {
		t.Fatalf("permission: %d", st)
	}
	has(t, "permission", v, "permission", "role_name", "user.login", "user.permissions", "user.role_name")
	if p := v.(map[string]any); p["permission"] != "write" || p["role_name"] != "maintain" {
		t.Errorf("maintain reads as %v / %v, want write / maintain", p["permission"], p["role_name"])
	}

	// A custom role: role_name is its name, permission its base role's.
	s.SetCustomRole("octo/r", "carol", "security-triager", "triage")
	if _, v := c.get("repos/octo/r/collaborators/carol/permission"); v.(map[string]any)["permission"] != "read" || v.(map[string]any)["role_name"] != "security-triager" {
		t.Errorf("a custom role on triage: %v", v)
	}
	// Anyone reads a public repository; a private one, only its collaborators.
	if _, v := c.get("repos/octo/r/collaborators/stranger/permission"); v.(map[string]any)["permission"] != "read" {
		t.Errorf("a stranger on a public repository: %v", v)
	}
	s.SetPrivate("octo/r", true)
	if _, v := c.get("repos/octo/r/collaborators/stranger/permission"); v.(map[string]any)["permission"] != "none" {
		t.Errorf("a stranger on a private repository: %v", v)
	}
	s.SetPrivate("octo/r", false)

	id := s.AddComment("octo/r", 1, "alice", "@mergegate queue")
	path := "repos/octo/r/issues/comments/" + itoa(id) + "/reactions"
	st1, _, r1 := c.do("POST", path, "token "+c.token, map[string]string{"content": "+1"}, nil)
	st2, _, r2 := c.do("POST", path, "token "+c.token, map[string]string{"content": "+1"}, nil)
	st3, _, _ := c.do("POST", path, "token "+c.token, map[string]string{"content": "thumbs-up"}, nil)
	if st1 != 201 || st2 != 200 || st3 != 422 {
		t.Errorf("reactions: %d, again %d, unknown content %d; want 201, 200, 422", st1, st2, st3)
	}
	has(t, "reaction", r1, "id", "node_id", "user.login", "content", "created_at")
	if a, b := r1.(map[string]any), r2.(map[string]any); a["id"] != b["id"] || a["created_at"] != b["created_at"] {
		t.Errorf("200 \"Reaction exists\" answers the reaction already there: %v, then %v", a, b)
	}
	if u := r1.(map[string]any)["user"].(map[string]any); u["login"] != fakegithub.AppBotLogin || u["type"] != "Bot" {
		t.Errorf("the App reacts as its bot user: %v", u)
	}

	// Over 1 MB the default media type answers 403 too_large.
	s.SetFile("octo/r", "big.bin", strings.Repeat("x", 1<<20+1))
	if st, v := c.get("repos/octo/r/contents/big.bin"); st != 403 || !strings.Contains(v.(map[string]any)["message"].(string), "too large") {
		t.Errorf("a file over 1 MB: %d %v", st, v)
	}
}

// Deleting a branch: 204, then 422 "Reference does not exist"; the default
// branch cannot be deleted (422).
func TestDeleteRefShapes(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	s.AddPR("octo/r", fakegithub.PR{Number: 1, HeadRef: "topic"})
	c := newClient(t, s)
	del := func(ref string) (int, string) {
		st, _, v := c.do("DELETE", "repos/octo/r/git/refs/"+ref, "token "+c.token, nil, nil)
		m, _ := v.(map[string]any)
		msg, _ := m["message"].(string)
		return st, msg
	}
	if st, _ := del("heads/topic"); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, msg := del("heads/topic"); st != 422 || msg != "Reference does not exist" {
		t.Errorf("delete again: %d %q", st, msg)
	}
	if st, msg := del("heads/main"); st != 422 || msg != "Cannot delete the default branch" {
		t.Errorf("delete the default branch: %d %q", st, msg)
	}
}

// A pull request's commits: at most 250 (GitHub's limit).
func TestPullCommitsAtMost250(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	var commits []fakegithub.Commit
	for i := range 300 {
		commits = append(commits, fakegithub.Commit{SHA: fakegithub.DeriveSHA("c", itoa(int64(i))), Message: "m", AuthorLogin: "alice"})
	}
	s.AddPR("octo/r", fakegithub.PR{Number: 1, Commits: commits})
	c := newClient(t, s)
	n := 0
	for page := 1; page < 5; page++ {
		st, v := c.get("repos/octo/r/pulls/1/commits?per_page=100&page=" + itoa(int64(page)))
		if st != 200 {
			t.Fatalf("page %d: %d", page, st)
		}
		if page == 1 {
			has(t, "commit", v.([]any)[0], "sha", "commit.message", "commit.author.name", "commit.author.email", "author.login", "html_url")
		}
		n += len(v.([]any))
	}
	if n != fakegithub.MaxPullCommits {
		t.Errorf("%d commits listed, want %d", n, fakegithub.MaxPullCommits)
	}
}

// Add labels takes the label names in each form GitHub documents.
func TestAddLabelsBodies(t *testing.T) {
	s := fakegithub.New(t)
	s.AddRepo(tenant, "octo/r", "main")
	s.AddPR("octo/r", fakegithub.PR{Number: 1})
	c := newClient(t, s)
	for i, body := range []any{
		map[string]any{"labels": []string{"a"}},
		[]string{"b"},
		map[string]any{"labels": []map[string]string{{"name": "c"}}},
		[]map[string]string{{"name": "d"}},
		"e",
	} {
		if st, _, v := c.do("POST", "repos/octo/r/issues/1/labels", "token "+c.token, body, nil); st != 200 || len(v.([]any)) != i+1 {
			t.Errorf("%v: %d %v", body, st, v)
		}
	}
	if st, _, _ := c.do("POST", "repos/octo/r/issues/1/labels", "token "+c.token, map[string]any{"labels": []string{}}, nil); st != 422 {
		t.Errorf("no labels: %d, want 422", st)
	}
}
