package fakegithub

import (
	"fmt"
	"maps"
	"slices"
	"time"
)

// The git model: commits with parents and a tree (path → content), beside
// the rest of the fake's state. Each repository's default branch starts at
// a root commit holding the repository's files (SetFile, while nothing has
// been committed on top of it); AddPR commits the pull request's Files on
// top of its base's tip; merges are three-way at file level. The branch
// tips stay in repo.branches (and PR heads in PR.HeadSHA), where the rest
// of the fake reads them; every move goes through setRef, which records it
// (BaseHistory) and gives a sha the model does not know a commit (a push
// made with SetBaseHead or SetHead: the previous tip's tree, unchanged).
//
// Routes (docs.github.com, "Git references", "Git commits", "Branches:
// merge a branch"):
//
//	GET    /repos/{o}/{r}/git/ref/{ref}          200 git-ref, 404 "Not Found"
//	POST   /repos/{o}/{r}/git/refs               201 git-ref; 422 "Reference already exists", "Object does not exist"
//	GET    /repos/{o}/{r}/git/matching-refs/{ref} 200 [git-ref] of the branches starting with it ([] for none)
//	PATCH  /repos/{o}/{r}/git/refs/{ref}         200 git-ref; 422 "Update is not a fast forward", "Reference does not exist",
//	                                             "Object does not exist", a protected branch's refusal
//	DELETE /repos/{o}/{r}/git/refs/{ref}         204 (contents.go)
//	POST   /repos/{o}/{r}/merges                 201 commit, 204 nothing to merge, 409 "Merge conflict",
//	                                             404 "Base does not exist" / "Head does not exist"
//	GET    /repos/{o}/{r}/git/commits/{sha}      200 git-commit, 404 "Not Found"
const (
	RouteGetRef       = "GET /repos/{owner}/{repo}/git/ref/{ref}"
	RouteMatchingRefs = "GET /repos/{owner}/{repo}/git/matching-refs/{ref}"
	RouteCreateRef    = "POST /repos/{owner}/{repo}/git/refs"
	RouteUpdateRef    = "PATCH /repos/{owner}/{repo}/git/refs/{ref}"
	RouteMergeBranch  = "POST /repos/{owner}/{repo}/merges"
	RouteGetCommit    = "GET /repos/{owner}/{repo}/git/commits/{commit_sha}"
)

// GitHub's messages of the git routes, as its users quote them.
const (
	// 422 on PATCH .../git/refs without force when the new sha does not
	// contain the old one (bors-ng/bors-ng#856).
	MsgNotFastForward = "Update is not a fast forward"
	// 422 on POST .../git/refs for a ref that is there.
	MsgRefExists = "Reference already exists"
	// 422 on PATCH and DELETE of a ref that is not there.
	MsgRefMissing = "Reference does not exist"
	// 422 on a ref write to a sha the repository does not have.
	MsgObjectMissing = "Object does not exist"
	// 409 on POST /merges when head and base change the same file. The
	// merges API answers 201 (merged), 204 (nothing to merge), 404
	// (missing base or head), 409 (conflict): GitHub's v3 "Perform a
	// merge" page, as sigmavirus24/github3.py#417 quotes it. The 404s'
	// words are the fake's: GitHub's page names the cases only.
	MsgMergeConflict = "Merge conflict"
	MsgBaseMissing   = "Base does not exist"
	MsgHeadMissing   = "Head does not exist"
	// A protected branch's refusals of a ref update (422): the sentences
	// GitHub's push hook prints after "Protected branch update failed for
	// refs/heads/<b>." (openwrt/packages#7624, kubeflow/pipelines#4384),
	// as the REST API answers them (googleapis/repo-automation-bots#5551:
	// an updateRef refused "Changes must be made through a pull
	// request."; bors-ng/bors-ng#49: "Cannot force-push to a protected
	// branch"). Required checks: MsgRequiredCheckExpectedFormat for one,
	// MsgRequiredChecksExpectedFormat for several.
	MsgPushNeedsPR                  = "Changes must be made through a pull request."
	MsgPushForce                    = "Cannot force-push to a protected branch"
	MsgPushMergeQueue               = "Changes must be made through the merge queue"
	MsgRequiredCheckExpectedFormat  = "Required status check %q is expected."
	MsgRequiredChecksExpectedFormat = "%d of %d required status checks are expected."
)

// commit is one commit of the model.
type commit struct {
	sha     string
	parents []string
	tree    *tree
	treeSHA string
	message string
	at      time.Time
	// own are the pull requests whose changes it brings itself (a PR's
	// head, a squash or rebase merge), via the commits whose changes it
	// holds without having them as parents (a squash's or rebase's PR
	// head): what prsOf walks besides the parents.
	own []int
	via []string
	gen int // 1 + its parents' greatest (a root's is 1): walks stop below a commit's
}

// gitRepo is one repository's git model. Guarded by Server.mu.
type gitRepo struct {
	commits   map[string]*commit
	history   map[string][]string     // branch -> every sha it pointed to, oldest first
	goneHeads map[string]bool         // PR head branches deleted through the API
	allowPush map[string]bool         // protected branches the App may push to (AllowPush)
	owners    map[string]map[int]bool // path -> the pull requests whose Files change it
	root      string
	foreign   []*foreignPush    // PushForeign's pushes not made yet
	prevHead  map[string]string // a pull request's head sha -> the head it replaced
}

// movedHead records that a pull request's head moved from before to after.
func (g *gitRepo) movedHead(before, after string) {
	if before == "" || before == after {
		return
	}
	if g.prevHead == nil {
		g.prevHead = map[string]string{}
	}
	g.prevHead[after] = before
}

// treeSHA is a tree's id, from its sorted entries (path and blob sha).
func treeSHA(tree map[string]string) string {
	paths := slices.Sorted(maps.Keys(tree))
	parts := make([]string, 0, 2*len(paths)+1)
	parts = append(parts, "tree")
	for _, p := range paths {
		parts = append(parts, p, blobSHA(tree[p]))
	}
	return DeriveSHA(parts...)
}

// newGitRepo is a repository's model with its root commit at sha.
func newGitRepo(root string, files map[string]string, at time.Time) *gitRepo {
	g := &gitRepo{commits: map[string]*commit{}, history: map[string][]string{}, goneHeads: map[string]bool{}, allowPush: map[string]bool{},
		owners: map[string]map[int]bool{}, root: root}
	g.add(&commit{sha: root, tree: flatTree(files), message: "Initial commit", at: at})
	return g
}

// add stores c, filling its tree sha and generation.
func (g *gitRepo) add(c *commit) *commit {
	if c.tree == nil {
		c.tree = flatTree(nil)
	}
	c.treeSHA = c.tree.sha
	c.gen = 1
	for _, p := range c.parents {
		if pc := g.commits[p]; pc != nil {
			c.gen = max(c.gen, pc.gen+1)
		}
	}
	g.commits[c.sha] = c
	return c
}

// child is a new commit on parents with tree, bringing the changes of
// the pull requests own.
func (g *gitRepo) child(sha string, parents []string, t *tree, message string, at time.Time, own ...int) *commit {
	return g.add(&commit{sha: sha, parents: parents, tree: t, message: message, at: at, own: own})
}

// prsOf is the set of pull requests whose changes commit sha holds: its
// own and those of every commit it has in its history (or via).
func (g *gitRepo) prsOf(sha string) map[int]bool {
	prs := map[int]bool{}
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		c := g.commits[s]
		if c == nil || seen[s] {
			continue
		}
		seen[s] = true
		for _, n := range c.own {
			prs[n] = true
		}
		stack = append(append(stack, c.parents...), c.via...)
	}
	return prs
}

// ancestors is sha and every commit reachable from it down to generation
// floor (0: all of them).
func (g *gitRepo) ancestors(sha string, floor int) map[string]bool {
	seen := map[string]bool{}
	stack := []string{sha}
	for len(stack) > 0 {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == "" || seen[s] {
			continue
		}
		c := g.commits[s]
		if c != nil && c.gen < floor {
			continue
		}
		seen[s] = true
		if c != nil {
			stack = append(stack, c.parents...)
		}
	}
	return seen
}

// reachable: target is from or one of its ancestors (the walk stops below
// target's generation).
func (g *gitRepo) reachable(from, target string) bool {
	if from == target {
		return true
	}
	t := g.commits[target]
	if t == nil {
		return false
	}
	return g.ancestors(from, t.gen)[target]
}

// mergeBase is a best common ancestor of a and b ("" when none): walking
// down from both, highest generation first, the first commit reached from
// both sides.
func (g *gitRepo) mergeBase(a, b string) string {
	const fromA, fromB = 1, 2
	color := map[string]int{}
	var queue []*commit // kept sorted by generation, highest last
	push := func(sha string, side int) {
		c := g.commits[sha]
		if c == nil || color[sha]&side != 0 {
			return
		}
		color[sha] |= side
		i, _ := slices.BinarySearchFunc(queue, c.gen, func(q *commit, gen int) int { return q.gen - gen })
		queue = slices.Insert(queue, i, c)
	}
	push(a, fromA)
	push(b, fromB)
	for len(queue) > 0 {
		c := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		side := color[c.sha]
		if side == fromA|fromB {
			return c.sha
		}
		for _, p := range c.parents {
			push(p, side)
		}
	}
	return ""
}

// merge3 merges the tree of theirs into the tree of ours from their
// merge base, file by file (mergeTrees).
func (g *gitRepo) merge3(ours, theirs string) (*tree, []string) {
	base := flatTree(nil)
	if mb := g.commits[g.mergeBase(ours, theirs)]; mb != nil {
		base = mb.tree
	}
	return mergeTrees(base, g.treeOf(ours), g.treeOf(theirs))
}

// treeOf is commit sha's tree (an empty one for a commit the model does
// not know).
func (g *gitRepo) treeOf(sha string) *tree {
	if c := g.commits[sha]; c != nil {
		return c.tree
	}
	return flatTree(nil)
}

// setRef points branch at sha, recording it; a sha the model does not know
// becomes a commit on the branch's previous tip (or the default branch's)
// with its tree. Called with s.mu held.
func (s *Server) setRef(rp *repo, branch, sha string) {
	g := rp.git
	if g.commits[sha] == nil {
		parent, ok := rp.branches[branch]
		if !ok {
			parent = rp.branches[rp.defaultBranch]
		}
		var parents []string
		if g.commits[parent] != nil {
			parents = []string{parent}
		}
		g.child(sha, parents, g.treeOf(parent), "Push to "+branch, s.now())
	}
	rp.branches[branch] = sha
	g.history[branch] = append(g.history[branch], sha)
}

// moveBranch moves branch to sha after a push or a merge (every move of a
// branch but the one that merges except, whose merge recorded itself):
// as after a push to GitHub, every open pull request of that base whose
// head is now in it is merged (GitHub marks a pull request merged when
// its head is pushed to its base, refined-github/sandbox#163; its
// merge_commit_sha is the pushed commit), the others are behind and of
// unknown mergeability; a commit pushed to a branch CI runs on starts CI.
// A PR head branch that moves gives its pull request a new head. Called
// with s.mu held.
func (s *Server) moveBranch(rp *repo, branch, sha string, except *PR) {
	if _, ok := rp.branches[branch]; !ok {
		if pr := rp.headPR(branch); pr != nil {
			s.setPRHead(rp, pr, sha)
			return
		}
	}
	s.setRef(rp, branch, sha)
	var in map[string]bool
	now := s.now()
	for _, n := range slices.Sorted(maps.Keys(rp.prs)) {
		other := rp.prs[n]
		if other == except || other.State != "open" || other.BaseRef != branch {
			continue
		}
		if in == nil {
			floor := 0
			for _, pr := range rp.prs {
				if c := rp.git.commits[pr.HeadSHA]; pr.State == "open" && pr.BaseRef == branch && c != nil && (floor == 0 || c.gen < floor) {
					floor = c.gen
				}
			}
			in = rp.git.ancestors(sha, floor)
		}
		if in[other.HeadSHA] {
			other.State, other.Merged, other.MergeCommitSHA = "closed", true, sha
			other.MergedAt, other.ClosedAt, other.UpdatedAt = now, now, now
			continue
		}
		other.Behind = true
		other.unknownReads = s.unknownReads
	}
	s.startCI(rp, branch, sha, nil)
}

// setPRHead gives pr the head sha (a push to its head branch), committing
// it on the previous head with the pull request's Files when the model
// does not know it. Called with s.mu held.
func (s *Server) setPRHead(rp *repo, pr *PR, sha string) {
	from := pr.HeadSHA
	pr.HeadSHA = sha
	pr.UpdatedAt = s.now()
	pr.unknownReads = s.unknownReads
	s.commitPRHead(rp, pr, from)
}

// commitPRHead makes pr's head a commit of the model (on parent, or on
// its base's tip when parent is not one): its parent's tree with the
// pull request's Files. A head the model knows is left as it is. Starts
// CI on it. Called with s.mu held.
func (s *Server) commitPRHead(rp *repo, pr *PR, parent string) {
	g := rp.git
	g.movedHead(parent, pr.HeadSHA)
	for p := range pr.Files {
		if g.owners[p] == nil {
			g.owners[p] = map[int]bool{}
		}
		g.owners[p][pr.Number] = true
	}
	if g.commits[pr.HeadSHA] == nil {
		if g.commits[parent] == nil {
			parent = rp.branches[pr.BaseRef]
		}
		var parents []string
		if g.commits[parent] != nil {
			parents = []string{parent}
		}
		g.child(pr.HeadSHA, parents, g.treeOf(parent).with(pr.Files), pr.Title, s.now(), pr.Number)
	}
	s.startCI(rp, pr.HeadRef, pr.HeadSHA, pr)
}

// headPR is the open (else the newest) same-repository pull request whose
// head branch is branch, unless that branch was deleted.
func (rp *repo) headPR(branch string) *PR {
	if rp.git.goneHeads[branch] {
		return nil
	}
	better := func(a, b *PR) bool {
		if (a.State == "open") != (b.State == "open") {
			return a.State == "open"
		}
		return a.Number > b.Number
	}
	var found *PR
	for _, pr := range rp.prs {
		if !pr.Fork && pr.HeadRef == branch && (found == nil || better(pr, found)) {
			found = pr
		}
	}
	return found
}

// refSHA is where branch points: a branch, or a pull request's head
// branch.
// staleRef is how a branch looks to the reads after a write to it,
// until they are used up (Options.StaleRefReads).
type staleRef struct {
	sha   string // before the write; "" when the branch did not exist
	reads int
}

// wroteRef records an API write to branch, before it is made: its next
// reads see the branch as it is now. Called with s.mu held.
func (s *Server) wroteRef(rp *repo, branch string) {
	if s.staleReads == 0 {
		return
	}
	if rp.stale == nil {
		rp.stale = map[string]staleRef{}
	}
	sha, _ := rp.refSHA(branch)
	rp.stale[branch] = staleRef{sha: sha, reads: s.staleReads}
}

// readRef is branch as an API read sees it: a replica's answer, which may
// be from before the latest write (wroteRef). Called with s.mu held.
func (rp *repo) readRef(branch string) (string, bool) {
	st, ok := rp.stale[branch]
	if !ok {
		return rp.refSHA(branch)
	}
	if st.reads--; st.reads <= 0 {
		delete(rp.stale, branch)
	} else {
		rp.stale[branch] = st
	}
	return st.sha, st.sha != ""
}

func (rp *repo) refSHA(branch string) (string, bool) {
	if sha, ok := rp.branches[branch]; ok {
		return sha, true
	}
	if pr := rp.headPR(branch); pr != nil {
		return pr.HeadSHA, true
	}
	return "", false
}

// conflicted: the pull request's head and its base's tip change a file
// differently (the model's conflict; PR.Unmergeable is the set one).
func (rp *repo) conflicted(pr *PR) bool {
	// Only pull requests change files (pushes keep their tree): one whose
	// files no other pull request changes cannot conflict.
	shared := false
	for p := range pr.Files {
		shared = shared || len(rp.git.owners[p]) > 1
	}
	if !shared {
		return false
	}
	tip := rp.branches[pr.BaseRef]
	if rp.git.commits[tip] == nil || rp.git.commits[pr.HeadSHA] == nil {
		return false
	}
	_, conflicts := rp.git.merge3(tip, pr.HeadSHA)
	return len(conflicts) > 0
}

// commitPRMerge writes the merge of pr (method merge, squash or rebase)
// onto its base's tip as commit sha: a merge commit of the tip and the
// head, or one commit on the tip, with the three-way merge's tree either
// way. Called with s.mu held.
func (s *Server) commitPRMerge(rp *repo, pr *PR, method, sha, message string) {
	g := rp.git
	tip := rp.branches[pr.BaseRef]
	tree, _ := g.merge3(tip, pr.HeadSHA)
	if method == "merge" {
		g.child(sha, []string{tip, pr.HeadSHA}, tree, message, s.now())
		return
	}
	g.child(sha, []string{tip}, tree, message, s.now()).via = []string{pr.HeadSHA}
}

// commitBranchUpdate writes update-branch's new head: for "update" a
// merge commit of the old head and the base's tip, for "rebase" one commit
// on the tip, with the merge's tree. Called with s.mu held.
func (s *Server) commitBranchUpdate(rp *repo, pr *PR, from, kind string) {
	g := rp.git
	g.movedHead(from, pr.HeadSHA)
	tip := rp.branches[pr.BaseRef]
	tree, _ := g.merge3(tip, from)
	if kind == "rebase" {
		g.child(pr.HeadSHA, []string{tip}, tree, pr.Title, s.now()).via = []string{from}
	} else {
		g.child(pr.HeadSHA, []string{from, tip}, tree, "Merge branch '"+pr.BaseRef+"' into "+pr.HeadRef, s.now())
	}
	s.startCI(rp, pr.HeadRef, pr.HeadSHA, pr)
}

// pushRefusal is the message with which a protected branch refuses the
// App's move of branch from one sha to another, or "": a branch with
// classic protection or a ruleset refuses unless the App may bypass it
// (AllowPush), when the move is forced and not a fast-forward, pushes are
// restricted, the merge queue or reviews are required, the new tip has
// not passed the required checks (GitHub lets a push through whose
// commit has: bors-ng/bors-ng#301), or linear history is required and
// the push brings a merge commit. Called with s.mu held.
func (rp *repo) pushRefusal(branch, from, to string, force bool) string {
	prot, rs := rp.protection[branch], rp.rulesets[branch]
	if (prot == nil && rs == nil) || rp.git.allowPush[branch] {
		return ""
	}
	e := rp.rulesOf(branch)
	reviews := (prot != nil && prot.reviewsOn) || (rs != nil && rs.reviewsOn)
	switch {
	case force && !rp.git.reachable(to, from):
		return MsgPushForce
	case e.pushRestricted:
		return MsgNotAuthorized
	case e.mergeQueue:
		return MsgPushMergeQueue
	case reviews:
		return MsgPushNeedsPR
	}
	if contexts, _, _, _ := rp.requiredChecks(branch); len(contexts) > 0 {
		var missing []string
		for _, c := range contexts {
			if rp.checkProblem(branch, c, to) != "" {
				missing = append(missing, c)
			}
		}
		switch {
		case len(missing) == 1:
			return fmt.Sprintf(MsgRequiredCheckExpectedFormat, missing[0])
		case len(missing) > 1:
			return fmt.Sprintf(MsgRequiredChecksExpectedFormat, len(missing), len(contexts))
		}
	}
	if e.linear {
		floor := 0
		if c := rp.git.commits[from]; c != nil {
			floor = c.gen
		}
		before := rp.git.ancestors(from, floor)
		for sha := range rp.git.ancestors(to, floor) {
			if c := rp.git.commits[sha]; !before[sha] && c != nil && len(c.parents) > 1 {
				return MsgLinearHistory
			}
		}
	}
	return ""
}
