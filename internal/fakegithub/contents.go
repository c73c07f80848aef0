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
	"time"
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
	rp.syncRootFiles()
}

// DeclareFileSize makes the contents API's answer for path say size
// whatever the file holds: a client must count the bytes it receives, not
// trust the size it is told (a proxy or a GitHub that misreports it).
func (s *Server) DeclareFileSize(fullName, path string, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.declaredSize == nil {
		rp.declaredSize = map[string]int{}
	}
	rp.declaredSize[strings.Trim(path, "/")] = size
}

// syncRootFiles gives the root commit the default branch's files while
// the branch is still at it (SetFile and RemoveFile before anything else
// happened): the git model's first commit holds the repository's files.
func (rp *repo) syncRootFiles() {
	g := rp.git
	if rp.branches[rp.defaultBranch] != g.root {
		return
	}
	root := g.commits[g.root]
	root.tree = flatTree(rp.files)
	root.treeSHA = root.tree.sha
}

// RemoveFile deletes the file at path from the default branch.
func (s *Server) RemoveFile(fullName, path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	delete(rp.files, strings.Trim(path, "/"))
	rp.syncRootFiles()
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

// maxContentSize is the largest file the contents API returns with its
// content under the default media type: 1 MB (docs.github.com, "Get
// repository content": between 1 and 100 MB only the raw and object media
// types are served).
const maxContentSize = 1 << 20

// getContent answers GET /repos/{owner}/{repo}/contents/{path} for a file
// of the default branch (or ?ref= naming it): 200 with the base64 content
// (in lines of 60 characters), 404 "Not Found" when there is no such
// file, 403 "too_large" for a file over 1 MB. Directories are listed with
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
		if len(content) > maxContentSize {
			// The default media type serves files up to 1 MB; GitHub's
			// answer for a larger one, as its users quote it.
			writeJSON(w, http.StatusForbidden, obj{
				"message":           "This API returns blobs up to 1 MB in size. The requested blob is too large to fetch via the API, but you can use the Git Data API to request blobs up to 100 MB in size.",
				"errors":            []obj{{"resource": "Blob", "field": "data", "code": "too_large"}},
				"documentation_url": "https://docs.github.com/rest/repos/contents#get-repository-content",
			})
			return
		}
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
	if n, ok := rp.declaredSize[path]; ok {
		o["size"] = n
	}
	return o
}

// Roles a user can have on a repository, least access first.
var roles = []string{"read", "triage", "write", "maintain", "admin"}

// legacyPermission is the permission field of the collaborator permission
// answer for each base role: GitHub keeps its old values, so maintain
// reads as write and triage as read.
var legacyPermission = map[string]string{"read": "read", "triage": "read", "write": "write", "maintain": "write", "admin": "admin"}

// SetRole gives user a role on the repository: read, triage, write,
// maintain or admin. Users without one read a public repository ("read")
// and have no access to a private one ("none", SetPrivate).
func (s *Server) SetRole(fullName, user, role string) {
	s.SetCustomRole(fullName, user, role, role)
}

// SetCustomRole gives user an organisation's custom repository role name,
// which inherits the base role base (read, triage, write, maintain or
// admin): GitHub answers role_name name and the permission of base.
func (s *Server) SetCustomRole(fullName, user, name, base string) {
	if !slices.Contains(roles, base) {
		s.fatalf("fakegithub: role %q: want one of %v", base, roles)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.mustRepo(fullName)
	if rp.roles == nil {
		rp.roles = map[string]customRole{}
	}
	rp.roles[strings.ToLower(user)] = customRole{name: name, base: base}
}

// customRole is a user's role on a repository: its name (a base role's
// own, or a custom role's) and the base role it grants.
type customRole struct{ name, base string }

// SetPrivate makes the repository private (or public again): a user
// without a role on it then has permission "none".
func (s *Server) SetPrivate(fullName string, private bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo(fullName).private = private
}

// getPermission answers GET /repos/{owner}/{repo}/collaborators/{username}/permission
// (docs.github.com, "Get repository permissions for a user"): permission
// is one of the legacy base roles admin, write, read or none (maintain
// reads as write and triage as read), role_name the role itself, a custom
// role's name included; user is the collaborator with its permissions and
// role_name. Anyone reads a public repository ("read"); a user without a
// role on a private one has "none".
func (s *Server) getPermission(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	user := r.PathValue("username")
	role, ok := rp.roles[strings.ToLower(user)]
	switch {
	case ok:
	case rp.private:
		role = customRole{name: "none", base: "none"}
	default:
		role = customRole{name: "read", base: "read"}
	}
	perm := legacyPermission[role.base]
	if perm == "" {
		perm = "none"
	}
	at := func(min string) bool { return slices.Index(roles, role.base) >= slices.Index(roles, min) }
	u := s.userJSON(user)
	u["permissions"] = obj{
		"admin": at("admin"), "maintain": at("maintain"), "push": at("write"), "triage": at("triage"), "pull": at("read"),
	}
	u["role_name"] = role.name
	writeJSON(w, http.StatusOK, obj{"permission": perm, "role_name": role.name, "user": u})
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

// createReaction answers POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions
// (docs.github.com, "Create reaction for an issue comment"): 201 "Reaction
// created" with the reaction, 200 "Reaction exists" with the one already
// there when the App had reacted so, 422 "Validation failed" for a content
// not among the eight; 404 for an unknown comment.
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
	// GitHub: 200 "Reaction exists" answers the reaction already there
	// (its id and time), 201 "Reaction created" a new one.
	key := reactionKey{id, body.Content}
	status := http.StatusOK
	re, ok := rp.reactions[key]
	if !ok {
		status = http.StatusCreated
		re = reactionRec{id: s.newID(), at: s.now()}
		if rp.reactions == nil {
			rp.reactions = map[reactionKey]reactionRec{}
		}
		rp.reactions[key] = re
		s.rec.reactions = append(s.rec.reactions, Reaction{Repo: rp.fullName, CommentID: id, Content: body.Content})
	}
	writeJSON(w, status, obj{"id": re.id, "node_id": nodeID("REA", re.id), "user": s.botJSON(),
		"content": body.Content, "created_at": ts(re.at)})
}

// AppBotLogin is the login GitHub gives the App's installation (what it
// writes as: comments, reactions; the sender of the webhooks its writes
// cause): its slug, AppSlug, and "[bot]".
const AppBotLogin = AppSlug + "[bot]"

// AppSlug is the App's slug, as GET /app answers it.
const AppSlug = "mergegate"

// getApp answers GET /app (docs.github.com, "Get the authenticated app":
// a JWT; 200 with the App).
func (s *Server) getApp(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.appJSON(s.appID, AppSlug))
}

// reactionKey is one reaction content on one comment (the App reacts as
// one user, so a content is there once).
type reactionKey struct {
	comment int64
	content string
}

type reactionRec struct {
	id int64
	at time.Time
}

// DeletedBranches returns the branches deleted through the API, in order,
// as "owner/name:branch".
func (s *Server) DeletedBranches() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.deletedRefs)
}

// deleteRef answers DELETE /repos/{owner}/{repo}/git/refs/{ref}
// (docs.github.com, "Delete a reference": 204, 409, 422 "Validation
// failed, an attempt was made to delete the default branch, or the
// endpoint has been spammed"): 204 for a branch that exists (a base branch
// other than the default one, or the head branch of a pull request in the
// repository itself); 422 "Cannot delete the default branch" for the
// default branch, 422 "Cannot delete this protected branch" for a branch
// with classic protection (allow_deletions is off), and 422 "Reference
// does not exist" for a ref that is not there, the messages GitHub gives
// (as its users quote them).
func (s *Server) deleteRef(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	branch, ok := strings.CutPrefix(r.PathValue("ref"), "heads/")
	if ok && branch == rp.defaultBranch {
		writeError(w, http.StatusUnprocessableEntity, "Cannot delete the default branch")
		return
	}
	if ok && rp.protection[branch] != nil {
		// Classic protection refuses deletions unless allow_deletions
		// (the fake never allows them), to Apps and admins alike.
		writeError(w, http.StatusUnprocessableEntity, "Cannot delete this protected branch")
		return
	}
	from, exists := "", false
	if ok {
		from, exists = rp.refSHA(branch)
	}
	if !exists {
		writeError(w, http.StatusUnprocessableEntity, "Reference does not exist")
		return
	}
	if _, isBranch := rp.branches[branch]; isBranch {
		s.wroteRef(rp, branch)
		delete(rp.branches, branch)
	} else {
		rp.git.goneHeads[branch] = true // a pull request's head branch
	}
	s.rec.deletedRefs = append(s.rec.deletedRefs, rp.fullName+":"+branch)
	s.rec.refWrites = append(s.rec.refWrites, RefWrite{Repo: rp.fullName, Action: "delete", Branch: branch, From: from})
	w.WriteHeader(http.StatusNoContent)
}

// addLabels answers POST /repos/{owner}/{repo}/issues/{issue_number}/labels
// (docs.github.com, "Add labels to an issue": {"labels": [...]} or a bare
// array, of names or of {"name": ...} objects, or one name; go-github
// sends the bare array of names): 200 with every label of the issue.
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
	if !labelNames(raw, &body.Labels) {
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

// MaxPullCommits is the most commits GitHub lists for a pull request
// (docs.github.com, "List commits on a pull request": "Lists a maximum of
// 250 commits for a pull request").
const MaxPullCommits = 250

// listPullCommits answers GET /repos/{owner}/{repo}/pulls/{pull_number}/commits:
// the first MaxPullCommits commits, oldest first, paginated; author is
// the GitHub user of the commit's author (null when its e-mail is no
// user's), commit.author the name and e-mail in the commit.
func (s *Server) listPullCommits(w http.ResponseWriter, r *http.Request) {
	rp, pr := s.prOf(w, r, "pull_number")
	if pr == nil {
		return
	}
	commits := pr.Commits
	if len(commits) == 0 {
		commits = []Commit{{SHA: pr.HeadSHA, Message: pr.Title, AuthorLogin: pr.Author, AuthorName: pr.Author, AuthorEmail: pr.Author + "@users.noreply.github.com"}}
	}
	if len(commits) > MaxPullCommits {
		commits = commits[:MaxPullCommits]
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

// labelNames reads the label names of an add-labels body, in any of the
// forms GitHub accepts.
func labelNames(raw json.RawMessage, out *[]string) bool {
	var obj struct {
		Labels json.RawMessage `json:"labels"`
	}
	if json.Unmarshal(raw, &obj) == nil && obj.Labels != nil {
		raw = obj.Labels
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		*out = []string{one}
		return true
	}
	var names []string
	if json.Unmarshal(raw, &names) == nil {
		*out = names
		return true
	}
	var named []struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil {
		return false
	}
	for _, n := range named {
		*out = append(*out, n.Name)
	}
	return true
}
