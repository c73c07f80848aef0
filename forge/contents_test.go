package forge_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// A file is read from the default branch, base64-decoded; a second read
// of the unchanged file is a 304 (free); a missing file or repository is
// not found, not an error.
func TestRepoFile(t *testing.T) {
	e := newEnv(t, envOpts{})
	body := strings.Repeat("merge_method: squash # a long line to wrap the base64 over several lines\n", 3)
	e.gh.SetFile(repo, ".github/mergegate.yml", body)

	f, found, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml")
	if err != nil || !found {
		t.Fatalf("RepoFile: %v found=%v", err, found)
	}
	if string(f.Content) != body || f.Path != ".github/mergegate.yml" || len(f.SHA) != 40 {
		t.Fatalf("file = %+v", f)
	}
	if !strings.HasSuffix(f.HTMLURL, "/octo/widgets/blob/main/.github/mergegate.yml") {
		t.Errorf("html_url = %s", f.HTMLURL)
	}
	again, _, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml")
	if err != nil || again.SHA != f.SHA {
		t.Fatalf("second read: %+v %v", again, err)
	}
	var got304 bool
	for _, c := range e.gh.Calls() {
		if c.Route == fakegithub.RouteGetContent && c.NotModified {
			got304 = true
		}
	}
	if !got304 {
		t.Errorf("the unchanged file was not a 304: %+v", e.gh.Calls())
	}

	e.gh.SetFile(repo, ".github/mergegate.yml", "merge_method: rebase\n")
	changed, _, _ := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml")
	if changed.SHA == f.SHA || string(changed.Content) != "merge_method: rebase\n" {
		t.Errorf("changed file = %+v", changed)
	}

	e.gh.RemoveFile(repo, ".github/mergegate.yml")
	if _, found, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml"); err != nil || found {
		t.Errorf("removed file: found=%v err=%v", found, err)
	}
	if _, found, err := e.c.RepoFile(e.ctx, tenant, "octo/.github", ".github/mergegate.yml"); err != nil || found {
		t.Errorf("a repository the installation cannot see: found=%v err=%v", found, err)
	}
	e.gh.SetFile(repo, ".github/other.yml", "x")
	if _, _, err := e.c.RepoFile(e.ctx, tenant, repo, ".github"); err == nil {
		t.Errorf("a directory read as a file")
	}
}

func TestUserPermission(t *testing.T) {
	e := newEnv(t, envOpts{})
	for _, c := range []struct{ role, perm string }{
		{"read", "read"}, {"triage", "read"}, {"write", "write"}, {"maintain", "write"}, {"admin", "admin"},
	} {
		e.gh.SetRole(repo, "u-"+c.role, c.role)
		p, err := e.c.UserPermission(e.ctx, tenant, repo, "u-"+c.role)
		if err != nil || p.Permission != c.perm || p.Role != c.role {
			t.Errorf("%s: %+v %v, want permission %s", c.role, p, err, c.perm)
		}
		if want := c.perm != "read"; p.CanWrite() != want {
			t.Errorf("%s: CanWrite %v", c.role, p.CanWrite())
		}
	}
	// A custom role is judged by the base role it inherits (permission),
	// not by its name (role_name).
	e.gh.SetCustomRole(repo, "u-custom-triage", "release-manager", "triage")
	e.gh.SetCustomRole(repo, "u-custom-write", "deployer", "write")
	for user, want := range map[string]bool{"u-custom-triage": false, "u-custom-write": true} {
		if p, err := e.c.UserPermission(e.ctx, tenant, repo, user); err != nil || p.CanWrite() != want {
			t.Errorf("%s: %+v %v, CanWrite want %v", user, p, err, want)
		}
	}
	// Strangers read a public repository and have none of a private one.
	for private, want := range map[bool]string{false: "read", true: "none"} {
		e.gh.SetPrivate(repo, private)
		if p, err := e.c.UserPermission(e.ctx, tenant, repo, "stranger"); err != nil || p.Permission != want || p.CanWrite() {
			t.Errorf("private=%v: %+v %v, want %s", private, p, err, want)
		}
	}
}

func TestReactAndDeleteBranch(t *testing.T) {
	e := newEnv(t, envOpts{})
	e.gh.AddPR(repo, fakegithub.PR{Number: 7})
	id := e.gh.AddComment(repo, 7, "alice", "@mergegate queue")
	if err := e.c.React(e.ctx, tenant, repo, id, "+1"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.React(e.ctx, tenant, repo, id, "+1"); err != nil { // 200: already there
		t.Fatal(err)
	}
	if err := e.c.React(e.ctx, tenant, repo, id+1000, "+1"); !forge.IsNotFound(err) {
		t.Errorf("unknown comment: %v", err)
	}
	if got := e.gh.Reactions(); len(got) != 1 || got[0].Content != "+1" || got[0].CommentID != id {
		t.Errorf("reactions = %+v", got)
	}
	if err := e.c.DeleteBranch(e.ctx, tenant, repo, "feature-7"); err != nil {
		t.Fatal(err)
	}
	if err := e.c.DeleteBranch(e.ctx, tenant, repo, "feature-7"); err != nil {
		t.Errorf("deleting a branch already gone: %v", err)
	}
	if got := e.gh.DeletedBranches(); len(got) != 1 || got[0] != repo+":feature-7" {
		t.Errorf("deleted = %v", got)
	}
	// GitHub refuses to delete the default branch (422): not "already gone".
	if err := e.c.DeleteBranch(e.ctx, tenant, repo, "main"); err == nil {
		t.Errorf("deleting the default branch succeeded")
	}
}

// A file over 1 MB is there, but GitHub does not send it (403
// too_large): found, with ErrFileTooLarge, and its sha and size from its
// directory's listing, so that one version is told from the next.
func TestRepoFileTooLarge(t *testing.T) {
	e := newEnv(t, envOpts{})
	big := strings.Repeat("#", 1<<20+10)
	e.gh.SetFile(repo, ".github/mergegate.yml", big)
	f, found, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml")
	if !errors.Is(err, forge.ErrFileTooLarge) || !found || !strings.Contains(err.Error(), "more than 1 MB") {
		t.Fatalf("found=%v err=%v", found, err)
	}
	if f.Size != 1<<20+10 || len(f.SHA) != 40 || f.Content != nil || f.Path != ".github/mergegate.yml" {
		t.Errorf("file = %+v", f)
	}
	e.gh.SetFile(repo, ".github/mergegate.yml", big+"#")
	if g, _, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml"); !errors.Is(err, forge.ErrFileTooLarge) || g.SHA == f.SHA {
		t.Errorf("the next version: %+v %v", g, err)
	}
}

// Between 256 KiB and 1 MB GitHub sends the file; mergegate counts the
// bytes it received, whatever size the JSON declares.
func TestRepoFileOverMaxFileSize(t *testing.T) {
	e := newEnv(t, envOpts{})
	content := strings.Repeat("# a comment line\n", forge.MaxFileSize/17+1)
	e.gh.SetFile(repo, ".github/mergegate.yml", content)
	e.gh.DeclareFileSize(repo, ".github/mergegate.yml", 20)
	f, found, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml")
	if !errors.Is(err, forge.ErrFileTooLarge) || !found || f.Size != len(content) || len(f.SHA) != 40 || f.Content != nil {
		t.Fatalf("file of %d bytes declared as 20: %+v found=%v err=%v", len(content), f, found, err)
	}
	e.gh.SetFile(repo, ".github/mergegate.yml", content[:forge.MaxFileSize])
	if f, _, err := e.c.RepoFile(e.ctx, tenant, repo, ".github/mergegate.yml"); err != nil || len(f.Content) != forge.MaxFileSize {
		t.Errorf("a file of exactly %d bytes: %d bytes, %v", forge.MaxFileSize, len(f.Content), err)
	}
}

// The merge commit's title and message reach GitHub.
func TestMergeWithMessage(t *testing.T) {
	e := newEnv(t, envOpts{})
	pr := e.gh.AddPR(repo, fakegithub.PR{Number: 3})
	if _, err := e.c.MergeWith(e.ctx, tenant, repo, 3, pr.HeadSHA, "squash", forge.CommitMessage{Title: "T (#3)", Message: "B"}); err != nil {
		t.Fatal(err)
	}
	if m := e.gh.Merges(); len(m) != 1 || m[0].Title != "T (#3)" || m[0].Message != "B" || m[0].Method != "squash" {
		t.Errorf("merges = %+v", m)
	}
}
