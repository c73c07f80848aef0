package fakegithub

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ForeignPush is a commit someone other than mergegate pushes onto a
// branch while mergegate works on it (PushForeign): on a merge train's
// build branch, a collaborator's push (or a leaked token's) between two
// of mergegate's requests.
type ForeignPush struct {
	// Prefix selects the branch: the push goes onto the branch, whose
	// name starts with Prefix, that the Merge-th merge (POST /merges)
	// into such a branch goes into.
	Prefix string
	Merge  int // 1: with the first merge into such a branch
	// Before: the commit lands just before that merge (after mergegate
	// last read the branch), else just after it.
	Before bool
	// Files are what the commit changes.
	Files map[string]string
}

type foreignPush struct {
	ForeignPush
	seen int // merges into a matching branch so far
}

// HeadBefore returns the head a pull request of fullName had before its
// head became sha (a synchronize delivery's before), "" when sha never
// replaced one.
func (s *Server) HeadBefore(fullName, sha string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mustRepo(fullName).git.prevHead[sha]
}

// PushForeign arranges p on fullName. The commit it pushes is a RefWrite
// with action "push" (its sha in SHA, the tip it went on in From).
func (s *Server) PushForeign(fullName string, p ForeignPush) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.mustRepo(fullName).git
	g.foreign = append(g.foreign, &foreignPush{ForeignPush: p})
}

// foreignFor counts a merge into branch and returns the push due with
// it (nil for none), which it takes off the list.
func (g *gitRepo) foreignFor(branch string) *ForeignPush {
	for i, f := range g.foreign {
		if !strings.HasPrefix(branch, f.Prefix) {
			continue
		}
		if f.seen++; f.seen == f.Merge {
			g.foreign = slices.Delete(g.foreign, i, i+1)
			return &f.ForeignPush
		}
	}
	return nil
}

// pushForeign makes p's commit on branch's tip and moves the branch to
// it. Called with s.mu held.
func (s *Server) pushForeign(rp *repo, branch string, p *ForeignPush) {
	g := rp.git
	tip := rp.branches[branch]
	sha := DeriveSHA(rp.fullName, tip, "foreign", strconv.FormatInt(s.newID(), 10))
	g.child(sha, []string{tip}, g.treeOf(tip).with(p.Files), "A commit pushed onto "+branch+" by someone else", s.now())
	s.moveBranch(rp, branch, sha, nil)
	s.rec.refWrites = append(s.rec.refWrites, RefWrite{Repo: rp.fullName, Action: "push", Branch: branch, From: tip, SHA: sha})
}

// RefWrite is a branch created, updated, deleted or merged into through the
// git routes.
type RefWrite struct {
	Repo   string `json:"repo"`
	Action string `json:"action"` // "create", "update", "delete" or "merge"
	Branch string `json:"branch"`
	From   string `json:"from,omitempty"` // the tip before ("" for create)
	SHA    string `json:"sha,omitempty"`  // the tip after ("" for delete)
	Head   string `json:"head,omitempty"` // merge: the head merged in, as asked
	Force  bool   `json:"force,omitempty"`
}

// AllowPush puts the App on branch's bypass list: its protection and
// rulesets no longer refuse the App's ref updates (PATCH .../git/refs).
// Merges of pull requests are not affected.
func (s *Server) AllowPush(fullName, branch string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepo(fullName).git.allowPush[branch] = true
}

// BaseHistory returns every sha branch pointed to, oldest first (its first
// tip included; a move to the sha it had counts again).
func (s *Server) BaseHistory(fullName, branch string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mustRepo(fullName).git.history[branch])
}

// Contains returns the numbers of the pull requests whose changes commit
// sha holds (their heads, or their squashed or rebased commits, are in
// its history), sorted; nil for a commit the model does not know.
func (s *Server) Contains(fullName, sha string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.mustRepo(fullName).git
	if g.commits[sha] == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(g.prsOf(sha)))
}

// TreeOf returns the tree sha of commit sha ("" for a commit the model does
// not know).
func (s *Server) TreeOf(fullName, sha string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mustRepo(fullName).git.commits[sha]; c != nil {
		return c.treeSHA
	}
	return ""
}

// FilesOf returns the files of commit sha (path → content), nil for a
// commit the model does not know.
func (s *Server) FilesOf(fullName, sha string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mustRepo(fullName).git.commits[sha]; c != nil {
		return c.tree.files()
	}
	return nil
}

// Parents returns the parents of commit sha.
func (s *Server) Parents(fullName, sha string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mustRepo(fullName).git.commits[sha]; c != nil {
		return slices.Clone(c.parents)
	}
	return nil
}

// RefWrites returns the ref writes and branch merges made through the git
// routes, in order.
func (s *Server) RefWrites() []RefWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rec.refWrites)
}
