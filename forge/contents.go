package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v62/github"
)

// MaxFileSize bounds a file read with RepoFile: a policy file is a few
// hundred bytes, and GitHub's contents API returns content inline only up
// to 1 MB.
const MaxFileSize = 256 << 10

// File is one file of a repository as GitHub's contents API returns it.
type File struct {
	Repo    string // owner/name it was read from
	Path    string
	SHA     string // the blob's sha: the same content has the same sha
	HTMLURL string
	Content []byte
	// Size is the file's size: the bytes received, or for a file over
	// 1 MB (which GitHub does not send) its directory listing's.
	Size int
}

// ErrNotAFile: the path names a directory, a symlink to one or a submodule.
var ErrNotAFile = errors.New("not a file")

// ErrFileTooLarge: the file is there, larger than MaxFileSize. RepoFile
// returns it with the File's Repo, Path, SHA and Size (no Content): the
// caller can tell one version of a too large file from the next.
var ErrFileTooLarge = errors.New("file too large")

// RepoFile reads path from repo's default branch (GET
// /repos/{owner}/{repo}/contents/{path}, base64 content). found is false
// when GitHub answers 404: no such file, or no such repository the
// installation can see (an organisation's .github repository the App is
// not installed on). A file over MaxFileSize is found, with an error
// wrapping ErrFileTooLarge: the size counted is the bytes received, not
// the size GitHub's JSON declares. Over 1 MB GitHub answers the file
// with encoding "none" and no content (older servers: 403, errors code
// too_large, and the file's sha and size are read from its directory's
// listing). The request is conditional
// like every GET (the ETag cache): an unchanged file costs no rate-limit
// point.
func (c *Client) RepoFile(ctx context.Context, tenant, repo, path string) (f File, found bool, err error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get-content", tenant, repo)
	if err != nil {
		return File{}, false, err
	}
	fc, dir, _, err := in.gh.Repositories.GetContents(ctx, owner, name, path, nil)
	if err != nil {
		if tooLarge(err) {
			return c.largeFile(ctx, tenant, repo, path)
		}
		err = cl.classify(ctx, err, false)
		if IsNotFound(err) {
			return File{}, false, nil
		}
		return File{}, false, err
	}
	if fc == nil || dir != nil || fc.GetType() != "file" {
		return File{}, true, fmt.Errorf("%s: %s: %w", repo, path, ErrNotAFile)
	}
	f = File{Repo: repo, Path: fc.GetPath(), SHA: fc.GetSHA(), HTMLURL: fc.GetHTMLURL(), Size: fc.GetSize()}
	if fc.GetEncoding() == "none" {
		// GitHub's answer for a file over 1 MB today: the file, with its
		// sha and size, and an empty content (PyGithub#2433).
		return f, true, overOneMB(f)
	}
	text, err := fc.GetContent() // base64, as GitHub sends it (with newlines)
	if err != nil {
		return File{}, true, fmt.Errorf("%s: %s: decoding GitHub's content: %w", repo, path, err)
	}
	f.Size = len(text)
	if len(text) > MaxFileSize {
		return f, true, fmt.Errorf("%s: %s is %d bytes, more than %d: %w", repo, path, len(text), MaxFileSize, ErrFileTooLarge)
	}
	f.Content = []byte(text)
	return f, true, nil
}

// tooLarge: GitHub's 403 for a file over 1 MB under the default media
// type ("This API returns blobs up to 1 MB in size", errors code
// too_large).
func tooLarge(err error) bool {
	var er *github.ErrorResponse
	if !errors.As(err, &er) || er.Response == nil || er.Response.StatusCode != http.StatusForbidden {
		return false
	}
	for _, e := range er.Errors {
		if e.Code == "too_large" {
			return true
		}
	}
	return false
}

// overOneMB is the error of f, a file GitHub sends only as raw media.
func overOneMB(f File) error {
	return fmt.Errorf("%s: %s is %d bytes, more than 1 MB (GitHub sends it only as raw media; mergegate reads at most %d bytes): %w",
		f.Repo, f.Path, f.Size, MaxFileSize, ErrFileTooLarge)
}

// largeFile reads a file GitHub would not send from its directory's
// listing (GET /repos/{owner}/{repo}/contents/{dir}: each entry's sha and
// size, no content).
func (c *Client) largeFile(ctx context.Context, tenant, repo, path string) (File, bool, error) {
	dirPath := ""
	if i := strings.LastIndex(path, "/"); i >= 0 {
		dirPath = path[:i]
	}
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get-content", tenant, repo)
	if err != nil {
		return File{}, true, err
	}
	_, entries, _, err := in.gh.Repositories.GetContents(ctx, owner, name, dirPath, nil)
	if err != nil {
		return File{}, true, fmt.Errorf("%s: %s is more than 1 MB; listing %q for its sha: %w", repo, path, dirPath, cl.classify(ctx, err, false))
	}
	for _, e := range entries {
		if e.GetPath() == path {
			f := File{Repo: repo, Path: path, SHA: e.GetSHA(), HTMLURL: e.GetHTMLURL(), Size: e.GetSize()}
			return f, true, overOneMB(f)
		}
	}
	return File{}, true, fmt.Errorf("%s: %s is more than 1 MB and not in its directory's listing: %w", repo, path, ErrFileTooLarge)
}

// Permission is a user's permission on a repository as GitHub's
// collaborator permission endpoint reports it: Permission is admin, write,
// read or none (maintain counts as write, triage as read); Role is the
// role's own name (admin, maintain, write, triage, read, or a custom
// role's).
type Permission struct {
	Permission string
	Role       string
}

// CanWrite: the user may push to the repository (write, maintain, admin).
// It reads Permission, not Role: a custom role's name says nothing of the
// base role it inherits, which Permission gives (maintain as write).
func (p Permission) CanWrite() bool { return p.Permission == "admin" || p.Permission == "write" }

// UserPermission reads user's permission on repo (GET
// /repos/{owner}/{repo}/collaborators/{username}/permission). A user who
// is not a collaborator gets "read" on a public repository, "none" on a
// private one; a user that does not exist is a 404 (Permission "none").
func (c *Client) UserPermission(ctx context.Context, tenant, repo, user string) (Permission, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "repos.get-collaborator-permission-level", tenant, repo)
	if err != nil {
		return Permission{}, err
	}
	// go-github v62's RepositoryPermissionLevel has no role_name.
	req, err := in.gh.NewRequest("GET", fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(owner), url.PathEscape(name), url.PathEscape(user)), nil)
	if err != nil {
		return Permission{}, err
	}
	var body struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if _, err := in.gh.Do(ctx, req, &body); err != nil {
		err = cl.classify(ctx, err, false)
		if IsNotFound(err) {
			return Permission{Permission: "none"}, nil
		}
		return Permission{}, err
	}
	return Permission{Permission: body.Permission, Role: body.RoleName}, nil
}

// React adds a reaction (+1, -1, laugh, confused, heart, hooray, rocket,
// eyes) to an issue or pull request comment (POST
// /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions).
func (c *Client) React(ctx context.Context, tenant, repo string, commentID int64, content string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "reactions.create-for-issue-comment", tenant, repo)
	if err != nil {
		return err
	}
	_, _, err = in.gh.Reactions.CreateIssueCommentReaction(ctx, owner, name, commentID, content)
	return cl.classify(ctx, err, false)
}

// DeleteBranch deletes branch of repo (DELETE
// /repos/{owner}/{repo}/git/refs/heads/{branch}). A branch already gone
// (GitHub answers 422 "Reference does not exist") is not an error; the
// repository's default branch (422 "Cannot delete the default branch")
// is.
func (c *Client) DeleteBranch(ctx context.Context, tenant, repo, branch string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "git.delete-ref", tenant, repo)
	if err != nil {
		return err
	}
	_, err = in.gh.Git.DeleteRef(ctx, owner, name, "heads/"+branch)
	err = cl.classify(ctx, err, false)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == 422 && ae.Message == "Reference does not exist" {
		return nil
	}
	return err
}

// AddLabel adds label to PR (or issue) number (POST
// /repos/{owner}/{repo}/issues/{issue_number}/labels).
func (c *Client) AddLabel(ctx context.Context, tenant, repo string, number int, label string) error {
	ctx, in, owner, name, cl, err := c.begin(ctx, "issues.add-labels", tenant, repo)
	if err != nil {
		return err
	}
	cl.number = number
	_, _, err = in.gh.Issues.AddLabelsToIssue(ctx, owner, name, number, []string{label})
	return cl.classify(ctx, err, false)
}

// CommitAuthor is who wrote one commit of a pull request.
type CommitAuthor struct {
	Login, Name, Email string
	// CoAuthors are the commit message's own Co-authored-by trailers.
	CoAuthors []string
}

// PRCommitAuthors lists the authors of a pull request's commits (GET
// /repos/{owner}/{repo}/pulls/{pull_number}/commits; GitHub lists at most
// 250).
func (c *Client) PRCommitAuthors(ctx context.Context, tenant, repo string, number int) ([]CommitAuthor, error) {
	ctx, in, owner, name, cl, err := c.begin(ctx, "pulls.list-commits", tenant, repo)
	if err != nil {
		return nil, err
	}
	cl.number = number
	opts := &github.ListOptions{PerPage: 100}
	var out []CommitAuthor
	for {
		commits, resp, err := in.gh.PullRequests.ListCommits(ctx, owner, name, number, opts)
		if err != nil {
			return nil, cl.classify(ctx, err, false)
		}
		for _, rc := range commits {
			a := CommitAuthor{Login: rc.GetAuthor().GetLogin(), Name: rc.GetCommit().GetAuthor().GetName(), Email: rc.GetCommit().GetAuthor().GetEmail()}
			for _, line := range strings.Split(rc.GetCommit().GetMessage(), "\n") {
				if t := strings.TrimSpace(line); strings.HasPrefix(strings.ToLower(t), "co-authored-by:") {
					a.CoAuthors = append(a.CoAuthors, t)
				}
			}
			out = append(out, a)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}
