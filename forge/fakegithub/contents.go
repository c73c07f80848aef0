package fakegithub

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Repository contents, collaborator permissions, comment reactions and
// branch deletion, in GitHub's shapes: what a repository's policy file
// (.github/mergegate.yml) and the comment commands need.

// SetFile puts a file at path on the repository's default branch (content
// "" still makes an empty file; RemoveFile deletes it).
func (s *Server) SetFile(fullName, path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.files == nil {
		rp.files = map[string]string{}
	}
	rp.files[strings.Trim(path, "/")] = content
}

// RemoveFile deletes the file at path from the default branch.
func (s *Server) RemoveFile(fullName, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mustRepo(fullName).files, strings.Trim(path, "/"))
}

// blobSHA is git's blob id of content: sha1("blob <size>\x00<content>").
func blobSHA(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// base64Lines is content base64-encoded in lines of 60 characters, each
// ending in a newline, as the contents API sends it.
func base64Lines(content string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(content))
	var b strings.Builder
	for len(enc) > 60 {
		b.WriteString(enc[:60])
		b.WriteByte('\n')
		enc = enc[60:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String()
}

// getContent answers GET /repos/{owner}/{repo}/contents/{path} for a file
// of the default branch (or ?ref= naming it): 200 with the base64 content,
// 404 "Not Found" when there is no such file. Directories are listed with
// the files directly under them.
func (s *Server) getContent(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	path := strings.Trim(r.PathValue("path"), "/")
	if ref := r.URL.Query().Get("ref"); ref != "" && ref != rp.defaultBranch {
		writeError(w, http.StatusNotFound, "No commit found for the ref "+ref)
		return
	}
	if content, ok := rp.files[path]; ok {
		writeJSON(w, http.StatusOK, s.contentJSON(rp, path, content, true))
		return
	}
	var dir []obj
	for p, content := range rp.files {
		if rest, ok := strings.CutPrefix(p, path+"/"); ok && !strings.Contains(rest, "/") {
			dir = append(dir, s.contentJSON(rp, p, content, false))
		}
	}
	if len(dir) == 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	slices.SortFunc(dir, func(a, b obj) int { return strings.Compare(a["path"].(string), b["path"].(string)) })
	writeJSON(w, http.StatusOK, dir)
}

func (s *Server) contentJSON(rp *repo, path, content string, withContent bool) obj {
	sha := blobSHA(content)
	name := path[strings.LastIndex(path, "/")+1:]
	self := s.apiURL("repos/%s/contents/%s?ref=%s", rp.fullName, path, rp.defaultBranch)
	git := s.apiURL("repos/%s/git/blobs/%s", rp.fullName, sha)
	html := fmt.Sprintf("%s%s/blob/%s/%s", htmlBase, rp.fullName, rp.defaultBranch, path)
	o := obj{
		"type": "file", "size": len(content), "name": name, "path": path, "sha": sha,
		"url": self, "git_url": git, "html_url": html,
		"download_url": fmt.Sprintf("https://raw.githubusercontent.com/%s/%s/%s", rp.fullName, rp.defaultBranch, path),
		"_links":       obj{"self": self, "git": git, "html": html},
	}
	if withContent {
		o["encoding"], o["content"] = "base64", base64Lines(content)
	}
	return o
}

// Roles a user can have on a repository, least access first.
var roles = []string{"read", "triage", "write", "maintain", "admin"}

// SetRole gives user a role on the repository: read, triage, write,
// maintain or admin. Users without one read a public repository: they
// have "read".
func (s *Server) SetRole(fullName, user, role string) {
	if !slices.Contains(roles, role) {
		s.fatalf("fakegithub: role %q: want one of %v", role, roles)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.roles == nil {
		rp.roles = map[string]string{}
	}
	rp.roles[strings.ToLower(user)] = role
}

// getPermission answers GET /repos/{owner}/{repo}/collaborators/{username}/permission:
// permission is admin, write, read or none (maintain reads as write and
// triage as read, as GitHub keeps the field's old values), role_name the
// role itself.
func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	user := r.PathValue("username")
	role := rp.roles[strings.ToLower(user)]
	if role == "" {
		role = "read"
	}
	perm := map[string]string{"read": "read", "triage": "read", "write": "write", "maintain": "write", "admin": "admin"}[role]
	u := s.userJSON(user)
	u["permissions"] = obj{
		"admin": role == "admin", "maintain": role == "admin" || role == "maintain",
		"push": perm != "read", "triage": role != "read", "pull": true,
	}
	u["role_name"] = role
	writeJSON(w, http.StatusOK, obj{"permission": perm, "role_name": role, "user": u})
}

// AddComment records a comment by user on PR number (someone wrote it on
// GitHub) and returns its id, for an issue_comment delivery and for
// reactions to it.
func (s *Server) AddComment(fullName string, number int, user, body string) int64 {
	return s.AddCommentID(fullName, number, 0, user, body)
}

// AddCommentID is AddComment with the comment's id as a delivery gave it
// (0: a new one).
func (s *Server) AddCommentID(fullName string, number int, id int64, user, body string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, _ := s.mustPR(fullName, number)
	if id == 0 {
		id = s.newID()
	}
	if rp.comments == nil {
		rp.comments = map[int64]int{}
	}
	rp.comments[id] = number
	s.rec.userComments = append(s.rec.userComments, Comment{Repo: rp.fullName, PRNumber: number, Body: body, User: user, ID: id})
	return id
}

// Reaction is a reaction added to a comment through the API.
type Reaction struct {
	Repo      string `json:"repo"`
	CommentID int64  `json:"commentId"`
	Content   string `json:"content"`
}

// Reactions returns the reactions added, in order.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.reactions)
}

var reactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// createReaction answers POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions:
// 201 with the reaction, 200 when the App had already reacted so, 404 for
// an unknown comment, 422 for an unknown content.
func (s *Server) createReaction(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("comment_id"), 10, 64)
	if _, ok := rp.comments[id]; err != nil || !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	var body struct {
		Content string `json:"content"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if !slices.Contains(reactionContents, body.Content) {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	status := http.StatusCreated
	for _, re := range s.rec.reactions {
		if re.Repo == rp.fullName && re.CommentID == id && re.Content == body.Content {
			status = http.StatusOK
		}
	}
	rid := s.newID()
	if status == http.StatusCreated {
		s.rec.reactions = append(s.rec.reactions, Reaction{Repo: rp.fullName, CommentID: id, Content: body.Content})
	}
	writeJSON(w, status, obj{"id": rid, "node_id": nodeID("REA", rid), "user": s.userJSON("mergegate[bot]"),
		"content": body.Content, "created_at": ts(s.now())})
}

// DeletedBranches returns the branches deleted through the API, in order,
// as "owner/name:branch".
func (s *Server) DeletedBranches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.deletedRefs)
}

// deleteRef answers DELETE /repos/{owner}/{repo}/git/refs/{ref}: 204 for
// a branch that exists (a base branch, or the head branch of a pull
// request in the repository itself), 422 "Reference does not exist"
// otherwise.
func (s *Server) deleteRef(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	branch, ok := strings.CutPrefix(r.PathValue("ref"), "heads/")
	exists := false
	if ok {
		_, exists = rp.branches[branch]
		for _, pr := range rp.prs {
			exists = exists || (!pr.Fork && pr.HeadRef == branch)
		}
		exists = exists && !slices.Contains(s.rec.deletedRefs, rp.fullName+":"+branch)
	}
	if !exists {
		writeError(w, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	delete(rp.branches, branch)
	s.rec.deletedRefs = append(s.rec.deletedRefs, rp.fullName+":"+branch)
	w.WriteHeader(http.StatusNoContent)
}

// addLabels answers POST /repos/{owner}/{repo}/issues/{issue_number}/labels
// ({"labels": [...]}, or the bare array of names go-github sends): 200
// with every label of the issue.
func (s *Server) addLabels(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "issue_number")
	if pr == nil {
		return
	}
	var raw json.RawMessage
	if !decodeBody(w, r, &raw) {
		return
	}
	var body struct {
		Labels []string `json:"labels"`
	}
	if json.Unmarshal(raw, &body) != nil && json.Unmarshal(raw, &body.Labels) != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	if len(body.Labels) == 0 {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	before := clonePR(pr)
	for _, l := range body.Labels {
		if !slices.ContainsFunc(pr.Labels, func(x string) bool { return strings.EqualFold(x, l) }) {
			pr.Labels = append(pr.Labels, l)
		}
	}
	pr.UpdatedAt = s.now()
	s.recordTriggerChanges(rp, before, pr)
	writeJSON(w, http.StatusOK, s.labelsJSON(rp, pr.Labels))
}

// listPullCommits answers GET /repos/{owner}/{repo}/pulls/{pull_number}/commits.
func (s *Server) listPullCommits(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	commits := pr.Commits
	if len(commits) == 0 {
		commits = []Commit{{SHA: pr.HeadSHA, Message: pr.Title, AuthorLogin: pr.Author, AuthorName: pr.Author, AuthorEmail: pr.Author + "@users.noreply.github.com"}}
	}
	out := []obj{}
	for _, c := range paginate(w, r, commits) {
		person := obj{"name": c.AuthorName, "email": c.AuthorEmail, "date": ts(pr.CreatedAt)}
		o := obj{
			"sha": c.SHA, "node_id": nodeID("C", int64(len(c.SHA))),
			"url":      s.apiURL("repos/%s/commits/%s", rp.fullName, c.SHA),
			"html_url": fmt.Sprintf("%s%s/commit/%s", htmlBase, rp.fullName, c.SHA),
			"commit":   obj{"author": person, "committer": person, "message": c.Message, "comment_count": 0},
			"author":   nil, "committer": nil, "parents": []obj{},
		}
		if c.AuthorLogin != "" {
			o["author"], o["committer"] = s.userJSON(c.AuthorLogin), s.userJSON(c.AuthorLogin)
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, out)
}
