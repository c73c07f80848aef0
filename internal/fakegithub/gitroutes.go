package fakegithub

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// refJSON is GitHub's git-ref.
func (s *Server) refJSON(rp *repo, branch, sha string) obj {
	return obj{
		"ref":     "refs/heads/" + branch,
		"node_id": nodeID("REF", int64(len(branch))+rp.id),
		"url":     s.apiURL("repos/%s/git/refs/heads/%s", rp.fullName, branch),
		"object": obj{
			"type": "commit",
			"sha":  sha,
			"url":  s.apiURL("repos/%s/git/commits/%s", rp.fullName, sha),
		},
	}
}

// personJSON is a commit's author or committer.
func personJSON(name string, at time.Time) obj {
	return obj{"name": name, "email": name + "@users.noreply.github.com", "date": ts(at)}
}

// parentsJSON are a commit's parents as GitHub lists them: urls under
// kind ("git/commits" in a git commit, "commits" in a commit).
func (s *Server) parentsJSON(rp *repo, c *commit, kind string) []obj {
	out := []obj{}
	for _, p := range c.parents {
		out = append(out, obj{"sha": p, "url": s.apiURL("repos/%s/%s/%s", rp.fullName, kind, p),
			"html_url": fmt.Sprintf("%s%s/commit/%s", htmlBase, rp.fullName, p)})
	}
	return out
}

// gitCommitJSON is GitHub's git-commit (GET .../git/commits/{sha}).
func (s *Server) gitCommitJSON(rp *repo, c *commit) obj {
	return obj{
		"sha":       c.sha,
		"node_id":   "C_" + c.sha[:min(len(c.sha), 12)],
		"url":       s.apiURL("repos/%s/git/commits/%s", rp.fullName, c.sha),
		"html_url":  fmt.Sprintf("%s%s/commit/%s", htmlBase, rp.fullName, c.sha),
		"author":    personJSON("octocat", c.at),
		"committer": personJSON("octocat", c.at),
		"message":   c.message,
		"tree":      obj{"sha": c.treeSHA, "url": s.apiURL("repos/%s/git/trees/%s", rp.fullName, c.treeSHA)},
		"parents":   s.parentsJSON(rp, c, "git/commits"),
		"verification": obj{
			"verified": false, "reason": "unsigned", "signature": nil, "payload": nil, "verified_at": nil,
		},
	}
}

// commitJSON is GitHub's commit (the merges API's 201): the git commit
// under "commit", GitHub users as author and committer.
func (s *Server) commitJSON(rp *repo, c *commit) obj {
	return obj{
		"sha":          c.sha,
		"node_id":      "C_" + c.sha[:min(len(c.sha), 12)],
		"url":          s.apiURL("repos/%s/commits/%s", rp.fullName, c.sha),
		"html_url":     fmt.Sprintf("%s%s/commit/%s", htmlBase, rp.fullName, c.sha),
		"comments_url": s.apiURL("repos/%s/commits/%s/comments", rp.fullName, c.sha),
		"commit": obj{
			"url":           s.apiURL("repos/%s/git/commits/%s", rp.fullName, c.sha),
			"author":        personJSON(AppBotLogin, c.at),
			"committer":     personJSON("GitHub", c.at),
			"message":       c.message,
			"tree":          obj{"sha": c.treeSHA, "url": s.apiURL("repos/%s/git/trees/%s", rp.fullName, c.treeSHA)},
			"comment_count": 0,
			"verification":  obj{"verified": false, "reason": "unsigned", "signature": nil, "payload": nil, "verified_at": nil},
		},
		"author":    s.botJSON(),
		"committer": s.userJSON("web-flow"),
		"parents":   s.parentsJSON(rp, c, "commits"),
	}
}

// branchOfRef is the branch of "heads/<branch>" ("refs/" optional).
func branchOfRef(ref string) (string, bool) {
	b, ok := strings.CutPrefix(strings.TrimPrefix(ref, "refs/"), "heads/")
	return b, ok && b != ""
}

// getRef answers GET /repos/{owner}/{repo}/git/ref/{ref}: a branch or a
// pull request's head branch; 404 "Not Found" for any other ref.
func (s *Server) getRef(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	branch, ok := branchOfRef(r.PathValue("ref"))
	sha, found := rp.readRef(branch)
	if !ok || !found {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.refJSON(rp, branch, sha))
}

// matchingRefs answers GET /repos/{owner}/{repo}/git/matching-refs/{ref}:
// 200 with the branches whose ref (after "refs/") starts with ref, sorted,
// an empty array for none (the fake models branches only; pull requests'
// head branches are not listed).
func (s *Server) matchingRefs(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	prefix := strings.TrimPrefix(r.PathValue("ref"), "refs/")
	out := []obj{}
	for _, b := range slices.Sorted(maps.Keys(rp.branches)) {
		if strings.HasPrefix("heads/"+b, prefix) {
			out = append(out, s.refJSON(rp, b, rp.branches[b]))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// createRef answers POST /repos/{owner}/{repo}/git/refs {ref, sha}: 201
// with the ref (and its Location); 422 "Reference already exists",
// "Object does not exist" for a sha the repository does not have, and
// "Validation Failed" for a name that is not refs/heads/<branch> (the
// fake models branches only).
func (s *Server) createRef(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	var body struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	branch, ok := branchOfRef(body.Ref)
	switch {
	case !ok || !strings.HasPrefix(body.Ref, "refs/"):
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	case rp.git.commits[body.SHA] == nil:
		writeError(w, http.StatusUnprocessableEntity, MsgObjectMissing)
		return
	}
	if _, exists := rp.refSHA(branch); exists {
		writeError(w, http.StatusUnprocessableEntity, MsgRefExists)
		return
	}
	delete(rp.git.goneHeads, branch)
	s.wroteRef(rp, branch)
	s.setRef(rp, branch, body.SHA)
	s.rec.refWrites = append(s.rec.refWrites, RefWrite{Repo: rp.fullName, Action: "create", Branch: branch, SHA: body.SHA})
	s.startCI(rp, branch, body.SHA, nil)
	w.Header().Set("Location", s.apiURL("repos/%s/git/refs/heads/%s", rp.fullName, branch))
	writeJSON(w, http.StatusCreated, s.refJSON(rp, branch, body.SHA))
}

// updateRef answers PATCH /repos/{owner}/{repo}/git/refs/{ref} {sha,
// force}: 200 with the ref; 422 "Reference does not exist", "Object does
// not exist", "Update is not a fast forward" (without force, a sha that
// does not contain the tip), or a protected branch's refusal
// (pushRefusal).
func (s *Server) updateRef(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	var body struct {
		SHA   string `json:"sha"`
		Force bool   `json:"force"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	branch, ok := branchOfRef(r.PathValue("ref"))
	from, exists := rp.refSHA(branch)
	switch {
	case !ok || !exists:
		writeError(w, http.StatusUnprocessableEntity, MsgRefMissing)
		return
	case rp.git.commits[body.SHA] == nil:
		writeError(w, http.StatusUnprocessableEntity, MsgObjectMissing)
		return
	case !body.Force && !rp.git.reachable(body.SHA, from):
		writeError(w, http.StatusUnprocessableEntity, MsgNotFastForward)
		return
	}
	if msg := rp.pushRefusal(branch, from, body.SHA, body.Force); msg != "" {
		writeError(w, http.StatusUnprocessableEntity, msg)
		return
	}
	if body.SHA != from {
		s.wroteRef(rp, branch)
		s.moveBranch(rp, branch, body.SHA, nil)
	}
	s.rec.refWrites = append(s.rec.refWrites, RefWrite{Repo: rp.fullName, Action: "update", Branch: branch, From: from, SHA: body.SHA, Force: body.Force})
	writeJSON(w, http.StatusOK, s.refJSON(rp, branch, body.SHA))
}

// mergeBranch answers POST /repos/{owner}/{repo}/merges {base, head,
// commit_message}: 201 with the new merge commit (always a merge commit,
// parents base's tip and head; a fresh sha each time, as GitHub's commits
// carry their time), 204 with no body when head is already in base, 409
// "Merge conflict", 409 with the push's refusal when base's protection or
// rules do not let the App push, 404 "Base does not exist" / "Head does
// not exist".
// head is a branch or a commit sha.
func (s *Server) mergeBranch(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	var body struct {
		Base          string `json:"base"`
		Head          string `json:"head"`
		CommitMessage string `json:"commit_message"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Base == "" || body.Head == "" {
		writeError(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	// A branch created a moment ago may not be there yet for the merge
	// (Mergifyio/mergify#3746: "404 Base does not exist" right after the
	// creation answered); a merge onto one that is, is made on its tip.
	if _, seen := rp.readRef(body.Base); !seen {
		writeError(w, http.StatusNotFound, MsgBaseMissing)
		return
	}
	tip, ok := rp.refSHA(body.Base)
	if !ok {
		writeError(w, http.StatusNotFound, MsgBaseMissing)
		return
	}
	head, ok := rp.refSHA(body.Head)
	if !ok {
		head = body.Head
	}
	if rp.git.commits[head] == nil {
		writeError(w, http.StatusNotFound, MsgHeadMissing)
		return
	}
	// A merge is a push to base ("the same thing as merging and then
	// pushing"): its protection and rules judge the new commit, which no
	// check has reported on. GitHub documents 409 and 403 here.
	if msg := rp.pushRefusal(body.Base, tip, "", false); msg != "" {
		writeError(w, http.StatusConflict, msg)
		return
	}
	foreign := rp.git.foreignFor(body.Base)
	if foreign != nil && foreign.Before {
		s.pushForeign(rp, body.Base, foreign)
		tip = rp.branches[body.Base]
		foreign = nil
	}
	if foreign != nil {
		defer s.pushForeign(rp, body.Base, foreign)
	}
	if rp.git.reachable(tip, head) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	tree, conflicts := rp.git.merge3(tip, head)
	if len(conflicts) > 0 {
		writeError(w, http.StatusConflict, MsgMergeConflict)
		return
	}
	msg := body.CommitMessage
	if msg == "" {
		msg = fmt.Sprintf("Merge %s into %s", body.Head, body.Base)
	}
	sha := DeriveSHA(rp.fullName, tip, head, "merges", strconv.FormatInt(s.newID(), 10))
	c := rp.git.child(sha, []string{tip, head}, tree, msg, s.now())
	s.wroteRef(rp, body.Base)
	s.moveBranch(rp, body.Base, sha, nil)
	s.rec.refWrites = append(s.rec.refWrites, RefWrite{Repo: rp.fullName, Action: "merge", Branch: body.Base, From: tip, SHA: sha, Head: body.Head})
	writeJSON(w, http.StatusCreated, s.commitJSON(rp, c))
}

// getCommit answers GET /repos/{owner}/{repo}/git/commits/{commit_sha}:
// 200 with the commit (its tree and parents), 404 "Not Found".
func (s *Server) getCommit(w http.ResponseWriter, r *http.Request) {
	rp := s.repoOf(w, r)
	if rp == nil {
		return
	}
	c := rp.git.commits[r.PathValue("commit_sha")]
	if c == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	writeJSON(w, http.StatusOK, s.gitCommitJSON(rp, c))
}
