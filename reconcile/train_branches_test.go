package reconcile

import "testing"

// The branches a train's emptying deletes: the base's own, under both
// prefixes; never another base's, whose name may start with this one's,
// nor a branch that only looks like mergegate's.
func TestTrainBranchOf(t *testing.T) {
	for _, c := range []struct {
		branch, base string
		want         bool
	}{
		{"mergegate/main/train", "main", true},
		{"mergegate/main/12", "main", true},
		{"mergegate-build/main/train", "main", true},
		{"mergegate-build/main/7", "main", true}, // an earlier build's, one per group
		{"mergegate/release/1/train", "release", false},
		{"mergegate/release/1/train", "release/1", true},
		{"mergegate/release/1", "release", true}, // release's group 1; release/1's are under mergegate/release/1/
		{"mergegate/release/1", "release/1", false},
		{"mergegate/main/train2", "main", false},
		{"mergegate/main/+3", "main", false},
		{"mergegate/main/-3", "main", false},
		{"mergegate/main/", "main", false},
		{"mergegate/mainline/train", "main", false},
		{"feature/mergegate/main/train", "main", false},
		{"main", "main", false},
	} {
		if got := trainBranchOf(c.branch, c.base); got != c.want {
			t.Errorf("trainBranchOf(%q, %q) = %v, want %v", c.branch, c.base, got, c.want)
		}
	}
}
