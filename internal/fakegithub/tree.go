package fakegithub

import (
	"maps"
	"slices"
)

// tree is the git model's set of files of a commit (path → content):
// immutable, a layer of changes over the tree it was made from, so that a
// commit costs its changes and not the whole repository (a train's merge
// commits, every pull request's head). A tree deeper than maxTreeDepth
// layers is stored flat instead, which bounds a lookup's walk.
type tree struct {
	base  *tree             // nil: delta holds every file
	delta map[string]string // files set on top of base
	depth int
	sha   string // treeSHA of its files
}

// maxTreeDepth bounds the layers a lookup walks.
const maxTreeDepth = 32

// flatTree is a tree holding files.
func flatTree(files map[string]string) *tree {
	t := &tree{delta: maps.Clone(files)}
	if t.delta == nil {
		t.delta = map[string]string{}
	}
	t.sha = treeSHA(t.delta)
	return t
}

// get is the content of path, and whether the tree has it.
func (t *tree) get(path string) (string, bool) {
	for ; t != nil; t = t.base {
		if v, ok := t.delta[path]; ok {
			return v, true
		}
	}
	return "", false
}

// files is every file of the tree, in a new map.
func (t *tree) files() map[string]string {
	var layers []*tree
	for l := t; l != nil; l = l.base {
		layers = append(layers, l)
	}
	out := map[string]string{}
	for i := len(layers) - 1; i >= 0; i-- {
		maps.Copy(out, layers[i].delta)
	}
	return out
}

// with is t with the files of delta set (t itself when delta changes
// nothing).
func (t *tree) with(delta map[string]string) *tree {
	changed := false
	for p, v := range delta {
		if old, ok := t.get(p); !ok || old != v {
			changed = true
			break
		}
	}
	if !changed {
		return t
	}
	if t.depth+1 > maxTreeDepth {
		all := t.files()
		maps.Copy(all, delta)
		return flatTree(all)
	}
	n := &tree{base: t, delta: maps.Clone(delta), depth: t.depth + 1}
	n.sha = treeSHA(n.files())
	return n
}

// changedSince returns the paths whose content may differ between base and
// t (the files set on the layers above base), and false when base is not
// one of t's layers (then any path may).
func (t *tree) changedSince(base *tree) ([]string, bool) {
	var paths []string
	for l := t; l != nil; l = l.base {
		if l == base || l.sha == base.sha { // the same files: the layers above hold the changes
			slices.Sort(paths)
			return slices.Compact(paths), true
		}
		for p := range l.delta {
			paths = append(paths, p)
		}
	}
	return nil, false
}

// mergeTrees merges theirs into ours from base, file by file: a path
// changed on one side takes that side; changed on both to different
// contents (or removed on one side and changed on the other) is a
// conflict.
func mergeTrees(base, ours, theirs *tree) (*tree, []string) {
	paths, ok := theirs.changedSince(base)
	if !ok {
		all := base.files()
		maps.Copy(all, theirs.files())
		paths = slices.Sorted(maps.Keys(all))
	}
	delta := map[string]string{}
	var removed, conflicts []string
	for _, p := range paths {
		o, inO := base.get(p)
		a, inA := ours.get(p)
		t, inT := theirs.get(p)
		switch {
		case inT == inO && t == o, inA == inT && a == t:
			// theirs did not change it, or both changed it alike
		case inA == inO && a == o:
			if inT {
				delta[p] = t
			} else {
				removed = append(removed, p)
			}
		default:
			conflicts = append(conflicts, p)
		}
	}
	if len(removed) > 0 {
		all := ours.files()
		maps.Copy(all, delta)
		for _, p := range removed {
			delete(all, p)
		}
		return flatTree(all), conflicts
	}
	return ours.with(delta), conflicts
}
