package fakegithub_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge/fakegithub"
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

	id := s.AddComment("octo/r", 1, "alice", "@mergegate queue")
	path := "repos/octo/r/issues/comments/" + itoa(id) + "/reactions"
	st1, _, r1 := c.do("POST", path, "token "+c.token, map[string]string{"content": "+1"}, nil)
	st2, _, _ := c.do("POST", path, "token "+c.token, map[string]string{"content": "+1"}, nil)
	st3, _, _ := c.do("POST", path, "token "+c.token, map[string]string{"content": "thumbs-up"}, nil)
	if st1 != 201 || st2 != 200 || st3 != 422 {
		t.Errorf("reactions: %d, again %d, unknown content %d; want 201, 200, 422", st1, st2, st3)
	}
	has(t, "reaction", r1, "id", "node_id", "user.login", "content", "created_at")
}
