package policy

import (
	"fmt"
	"path"
	"reflect"
	"regexp"
	"regexp/syntax"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/rules"
)

// Path is where a repository keeps its policy, on its default branch; the
// organisation's .github repository may hold one at the same path for
// every repository that has none.
const Path = ".github/mergegate.yml"

// OrgRepo is the organisation's (or user's) repository that holds the
// fallback policy: "<owner>/.github".
func OrgRepo(repo string) string {
	owner, _, _ := strings.Cut(repo, "/")
	return owner + "/.github"
}

// File is .github/mergegate.yml. A key left out takes the operator's
// default (the flags); nil pointers and nil slices are keys left out.
// docs/mergegate.schema.json describes the same keys (a test holds them
// together).
type File struct {
	TriggerLabels          []string `yaml:"trigger_labels" json:"trigger_labels,omitempty"`
	AutoMergeTrigger       *bool    `yaml:"auto_merge_trigger" json:"auto_merge_trigger,omitempty"`
	LabelRequiresWrite     *bool    `yaml:"label_requires_write" json:"label_requires_write,omitempty"`
	BlockingLabels         []string `yaml:"blocking_labels" json:"blocking_labels,omitempty"`
	BlockingTitle          *string  `yaml:"blocking_title" json:"blocking_title,omitempty"`
	PriorityLabels         []string `yaml:"priority_labels" json:"priority_labels,omitempty"`
	Branches               []string `yaml:"branches" json:"branches,omitempty"`
	DeleteBranchAfterMerge *bool    `yaml:"delete_branch_after_merge" json:"delete_branch_after_merge,omitempty"`
	Branch                 `yaml:",inline" json:",inline"`
	BaseBranches           map[string]BranchFile `yaml:"base_branches" json:"base_branches,omitempty"`

	// titleRE is BlockingTitle compiled, once, by Parse: every reading of
	// the policy (each delivery, each sync, each dashboard view) uses it.
	titleRE *regexp.Regexp
}

// Branch holds the keys that may also be set per base branch.
type Branch struct {
	MergeMethod   *string      `yaml:"merge_method" json:"merge_method,omitempty"`
	MergeCommit   *MergeCommit `yaml:"merge_commit" json:"merge_commit,omitempty"`
	CheckTimeout  *string      `yaml:"check_timeout" json:"check_timeout,omitempty"`
	UpdateMethod  *string      `yaml:"update_method" json:"update_method,omitempty"`
	Frozen        *bool        `yaml:"frozen" json:"frozen,omitempty"`
	FreezeMessage *string      `yaml:"freeze_message" json:"freeze_message,omitempty"`
	// Merge trains (docs/trains.md).
	Mode      *string `yaml:"mode" json:"mode,omitempty"`
	BatchSize *int    `yaml:"batch_size" json:"batch_size,omitempty"`
	Parallel  *int    `yaml:"parallel" json:"parallel,omitempty"`
	Retries   *int    `yaml:"retries" json:"retries,omitempty"`
	Landing   *string `yaml:"landing" json:"landing,omitempty"`
	BatchWait *string `yaml:"batch_wait" json:"batch_wait,omitempty"`
	Speculate *bool   `yaml:"speculate" json:"speculate,omitempty"`
}

// BranchFile is one entry of base_branches.
type BranchFile = Branch

// MergeCommit is the merge commit's title and message templates.
type MergeCommit struct {
	Title   *string `yaml:"title" json:"title,omitempty"`
	Message *string `yaml:"message" json:"message,omitempty"`
}

// Problem is one thing wrong with a policy file, where it is: the line
// and column a person sees in an editor.
type Problem struct {
	File   string `json:"file"`             // owner/name:path
	Line   int    `json:"line"`             // 1-based; 0 when the whole file is meant
	Column int    `json:"column,omitempty"` // 1-based; 0 when not known (YAML's syntax errors name a line only)
	Key    string `json:"key,omitempty"`
	Msg    string `json:"message"`
	// More, on the last problem of a list cut at MaxProblems, is how many
	// problems were left out (its message says so).
	More int `json:"more,omitempty"`
}

func (p Problem) String() string {
	switch {
	case p.Line == 0:
		return p.File + ": " + p.Msg
	case p.Column == 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Msg)
}

// Bounds of what a policy file may cost. A file has at most MaxProblems
// problems reported (then one more saying how many were left out), each
// value quoted in a problem at most maxQuoted bytes: 6,000 unknown keys
// still make a check run a person reads. A blocking_title is at most
// MaxPattern bytes (compiled once per file version), a merge_commit
// template at most MaxTemplate bytes.
const (
	MaxProblems = 50
	MaxPattern  = 1 << 10
	// MaxPatternSteps bounds the program a blocking_title compiles to
	// (regexp/syntax instructions): matching a 256-character title costs
	// about a millisecond at most.
	MaxPatternSteps = 5000
	MaxTemplate     = 8 << 10
	maxQuoted       = 80
	maxMessage      = 400
)

// Problems is every problem of one file, in line order: at most
// MaxProblems, then one that counts the rest (More).
type Problems []Problem

// Total is how many problems the file has, those left out included.
func (ps Problems) Total() int {
	n := 0
	for _, p := range ps {
		n += max(p.More, 1)
	}
	return n
}

// Listed are the problems themselves, without the one that counts those
// left out.
func (ps Problems) Listed() Problems {
	if n := len(ps); n > 0 && ps[n-1].More > 0 {
		return ps[:n-1]
	}
	return ps
}

func (ps Problems) Error() string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, "; ")
}

// Parse reads a policy file's content; name (owner/name:path) names it in
// problems. A file with any problem is refused as a whole (the caller
// keeps the last good one): unknown keys (a typo would silently do
// nothing), values of the wrong type, values out of range, YAML errors.
// An empty file is the defaults.
func Parse(name string, content []byte) (File, Problems) {
	var f File
	var doc yaml.Node
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return File{}, Problems{yamlProblem(name, err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return f, nil // empty
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return f, nil
	}
	w := walker{file: name}
	w.object(root, reflect.ValueOf(&f).Elem(), "")
	if len(w.problems) == 0 {
		w.problems = check(name, &doc, &f)
	}
	if len(w.problems) > 0 {
		sort.SliceStable(w.problems, func(i, j int) bool {
			a, b := w.problems[i], w.problems[j]
			return a.Line < b.Line || (a.Line == b.Line && a.Column < b.Column)
		})
		return File{}, capped(name, w.problems, w.more)
	}
	return f, nil
}

// capped keeps the first MaxProblems problems and says how many more
// there are.
// more counts problems the walk left out already (it stops describing
// them at MaxProblems: 6,000 unknown keys cost no 6,000 suggestions).
func capped(name string, ps Problems, more int) Problems {
	if len(ps) <= MaxProblems && more == 0 {
		return ps
	}
	if len(ps) > MaxProblems {
		more += len(ps) - MaxProblems
		ps = ps[:MaxProblems]
	}
	out := append(Problems{}, ps...)
	noun := "problems"
	if more == 1 {
		noun = "problem"
	}
	return append(out, Problem{File: name, More: more, Msg: fmt.Sprintf("and %d more %s (the first %d are shown)", more, noun, MaxProblems)})
}

// parserProblems are the messages of yaml.v3's parser errors (its
// parserc.go). yaml.v3 names the line of a parser error 0-based (its
// scanner's 1-based), and no line at all for a 0-based 0: the lines said
// here are the ones an editor shows.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected key":              true,
	"did not find expected '-' indicator":    true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// yamlProblem turns yaml.v3's syntax error ("yaml: line 3: ...") into a
// Problem on the 1-based line an editor shows. yaml.v3 gives no column.
func yamlProblem(name string, err error) Problem {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		_, msg, _ = strings.Cut(msg, ": ")
	}
	switch {
	case parserProblems[msg]:
		line++ // 0-based, 0 left out
	case line == 0 && !strings.HasPrefix(msg, "invalid ") && !strings.Contains(msg, "UTF-8") && !strings.Contains(msg, "control characters"):
		line = 1 // a scanner error on the first line: yaml.v3 leaves the line out
	}
	return Problem{File: name, Line: line, Msg: "not valid YAML: " + msg}
}

// walker checks a YAML document against File's keys and types, node by
// node, so that every problem has its line and says what is wanted in
// the file's own words (not Go's types).
type walker struct {
	file     string
	problems Problems
	more     int // problems found past MaxProblems, counted, not described
}

// full: MaxProblems problems are described; the rest are counted. The
// walk goes in document order, which is line order.
func (w *walker) full() bool {
	if len(w.problems) < MaxProblems {
		return false
	}
	w.more++
	return true
}

func (w *walker) add(n *yaml.Node, key, format string, args ...any) {
	if w.full() {
		return
	}
	w.problems = append(w.problems, Problem{File: w.file, Line: n.Line, Column: n.Column, Key: clip(key), Msg: clipMessage(fmt.Sprintf(format, args...))})
}

// clipMessage bounds a problem's message (the values it quotes are
// clipped already; a key path under a long branch name may not be).
func clipMessage(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// clip shortens a value from the file quoted in a problem: a problem
// says where and what, and a 100 KB key is shown by its start.
func clip(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// keysOf lists the yaml keys of struct type t (inline structs included)
// with their field indexes.
func keysOf(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if opts == "inline" {
			for k, idx := range keysOf(sf.Type) {
				out[k] = append([]int{i}, idx...)
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = []int{i}
		}
	}
	return out
}

// Keys lists File's top-level keys, sorted (the schema's test compares
// them); BranchKeys those of one base_branches entry.
func Keys() []string       { return sortedKeys(reflect.TypeOf(File{})) }
func BranchKeys() []string { return sortedKeys(reflect.TypeOf(Branch{})) }

func sortedKeys(t reflect.Type) []string {
	var out []string
	for k := range keysOf(t) {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (w *walker) object(n *yaml.Node, v reflect.Value, prefix string) {
	if n.Kind != yaml.MappingNode {
		w.add(n, strings.TrimSuffix(prefix, "."), "%swant a mapping of keys to values, not %s", inKey(prefix), describe(n))
		return
	}
	keys := keysOf(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := kn.Value
		full := prefix + key
		idx, ok := keys[key]
		switch {
		case !ok:
			if !w.full() {
				w.add(kn, full, "unknown key %q%s", clip(full), suggest(key, keys))
			}
			continue
		case seen[key]:
			w.add(kn, full, "%q is set twice", clip(full))
			continue
		}
		seen[key] = true
		w.value(vn, v.FieldByIndex(idx), full)
	}
}

func (w *walker) value(n *yaml.Node, f reflect.Value, key string) {
	t := f.Type()
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // key: (nothing): left out
	}
	switch {
	case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
		p := reflect.New(t.Elem())
		w.object(n, p.Elem(), key+".")
		f.Set(p)
	case t.Kind() == reflect.Pointer:
		p := reflect.New(t.Elem())
		if !w.scalar(n, p.Elem(), key) {
			return
		}
		f.Set(p)
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.add(n, key, "%s: want a list, e.g. %s: [%s], not %s", key, key, exampleItem(key, n), describe(n))
			return
		}
		s := reflect.MakeSlice(t, 0, len(n.Content))
		for _, item := range n.Content {
			e := reflect.New(t.Elem()).Elem()
			if w.scalar(item, e, key) {
				s = reflect.Append(s, e)
			}
		}
		f.Set(s)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.add(n, key, "%s: want a mapping of branch names to settings, not %s", key, describe(n))
			return
		}
		m := reflect.MakeMap(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			e := reflect.New(t.Elem()).Elem()
			w.object(vn, e, key+"."+kn.Value+".")
			m.SetMapIndex(reflect.ValueOf(kn.Value), e)
		}
		f.Set(m)
	}
}

// scalar decodes a string, a boolean or a whole number.
func (w *walker) scalar(n *yaml.Node, e reflect.Value, key string) bool {
	if n.Kind != yaml.ScalarNode {
		w.add(n, key, "%s: want %s, not %s", key, kindName(e.Kind()), describe(n))
		return false
	}
	switch e.Kind() {
	case reflect.Bool:
		var b bool
		if n.Tag != "!!bool" || n.Decode(&b) != nil {
			w.add(n, key, "%s: want true or false, not %q", key, clip(n.Value))
			return false
		}
		e.SetBool(b)
	case reflect.Int:
		var i int
		if n.Tag != "!!int" || n.Decode(&i) != nil {
			w.add(n, key, "%s: want a whole number, not %s", key, describe(n))
			return false
		}
		e.SetInt(int64(i))
	case reflect.String:
		if n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" {
			w.add(n, key, "%s: want a string, not %s", key, describe(n))
			return false
		}
		e.SetString(n.Value)
	}
	return true
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	}
	return "a string"
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!bool":
		return "the boolean " + n.Value
	case "!!int", "!!float":
		return "the number " + n.Value
	}
	return fmt.Sprintf("%q", clip(n.Value))
}

func inKey(prefix string) string {
	if prefix == "" {
		return "the file: "
	}
	return strings.TrimSuffix(prefix, ".") + ": "
}

func exampleItem(key string, n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Value != "" {
		return clip(n.Value)
	}
	return "..."
}

// suggest names the known key closest to a typo, when one is close: at
// most half the key's length away ("freeze" is 3 edits from "frozen").
func suggest(key string, keys map[string][]int) string {
	if len(key) > maxQuoted {
		return "" // no key is that long: nothing is close
	}
	best, bestD := "", max(len(key)/2, 1)+1
	for k := range keys {
		if d := distance(key, k); d < bestD || (d == bestD && best != "" && k < best) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the Levenshtein distance of a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// check validates the values Parse decoded (names and ranges), with the
// lines of their nodes.
func check(name string, root *yaml.Node, f *File) Problems {
	var ps Problems
	// base is the path to the keys checked (base_branches, a branch name
	// that may hold dots): key is one key under it, or a dotted path.
	var base []string
	bad := func(key, format string, args ...any) {
		path := append(append([]string{}, base...), strings.Split(key, ".")...)
		line, col := lineOf(root, path)
		ps = append(ps, Problem{File: name, Line: line, Column: col, Key: clip(strings.Join(path, ".")), Msg: clipMessage(fmt.Sprintf(format, args...))})
	}
	for _, l := range append(append(append([]string{}, f.TriggerLabels...), f.BlockingLabels...), f.PriorityLabels...) {
		if strings.TrimSpace(l) == "" {
			bad(keyOfLabel(*f, l), "a label name is empty")
		}
	}
	if f.BlockingTitle != nil && *f.BlockingTitle != "" {
		if problem := checkPattern(*f.BlockingTitle); problem != "" {
			bad("blocking_title", "%s", problem)
		} else if re, err := regexp.Compile(*f.BlockingTitle); err != nil {
			bad("blocking_title", "blocking_title %q is not a regular expression: %v", clip(*f.BlockingTitle), err)
		} else {
			f.titleRE = re
		}
	}
	for _, b := range f.Branches {
		if _, err := path.Match(b, ""); err != nil || b == "" {
			bad("branches", "branches: %q is not a branch name or pattern (such as release-*)", clip(b))
		}
	}
	// prefix names base's keys in messages: "" or "base_branches.<name>.".
	checkBranch := func(prefix string, b Branch) {
		if b.MergeMethod != nil {
			if err := forge.CheckMergeMethod(*b.MergeMethod); err != nil {
				bad("merge_method", "%smerge_method %q: want merge, squash or rebase", prefix, clip(*b.MergeMethod))
			}
		}
		switch {
		case b.UpdateMethod == nil || *b.UpdateMethod == UpdateMerge || *b.UpdateMethod == UpdateRebase:
		default:
			bad("update_method", "%supdate_method %q: want merge or rebase", prefix, clip(*b.UpdateMethod))
		}
		switch {
		case b.Mode == nil || *b.Mode == rules.ModeSerial || *b.Mode == rules.ModeTrain:
		default:
			bad("mode", "%smode %q: want serial or train", prefix, clip(*b.Mode))
		}
		switch {
		case b.Landing == nil || *b.Landing == rules.LandFastForward || *b.Landing == rules.LandReplay:
		default:
			bad("landing", "%slanding %q: want fast-forward or replay", prefix, clip(*b.Landing))
		}
		for _, r := range []struct {
			key      string
			v        *int
			min, max int
		}{{"batch_size", b.BatchSize, 1, MaxBatchSize}, {"parallel", b.Parallel, 1, MaxParallel}, {"retries", b.Retries, 0, MaxRetries}} {
			if r.v != nil && (*r.v < r.min || *r.v > r.max) {
				bad(r.key, "%s%s %d: want %d to %d", prefix, r.key, *r.v, r.min, r.max)
			}
		}
		if b.BatchWait != nil {
			if _, err := ParseBatchWait(*b.BatchWait); err != nil {
				bad("batch_wait", "%sbatch_wait %q: %v", prefix, clip(*b.BatchWait), err)
			}
		}
		if b.CheckTimeout != nil {
			if _, err := ParseTimeout(*b.CheckTimeout); err != nil {
				bad("check_timeout", "%scheck_timeout %q: %v", prefix, clip(*b.CheckTimeout), err)
			}
		}
		if mc := b.MergeCommit; mc != nil {
			for field, tpl := range map[string]*string{"title": mc.Title, "message": mc.Message} {
				if tpl == nil {
					continue
				}
				if err := CheckTemplate(*tpl); err != nil {
					bad("merge_commit."+field, "%smerge_commit.%s: %v", prefix, field, err)
				}
			}
		}
	}
	checkBranch("", f.Branch)
	names := make([]string, 0, len(f.BaseBranches))
	for n := range f.BaseBranches {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		base = []string{"base_branches", n}
		checkBranch("base_branches."+clip(n)+".", f.BaseBranches[n])
	}
	return ps
}

// checkPattern bounds what a blocking_title costs: its length, and the
// size of the program it compiles to (repetitions multiply it: 1 KiB of
// \pL{1,999} is 200,000 steps, 16 ms to match one title), which is what
// matching each title costs. "" when within bounds or not a pattern at
// all (regexp.Compile says why).
func checkPattern(p string) string {
	if len(p) > MaxPattern {
		return fmt.Sprintf("blocking_title is %d bytes long: at most %d (a pattern of a title is a few words)", len(p), MaxPattern)
	}
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return ""
	}
	prog, err := syntax.Compile(re.Simplify())
	if err == nil && len(prog.Inst) > MaxPatternSteps {
		return fmt.Sprintf("blocking_title compiles to %d steps: at most %d (repetitions such as {1,999} multiply a pattern)", len(prog.Inst), MaxPatternSteps)
	}
	return ""
}

func keyOfLabel(f File, l string) string {
	for _, x := range f.TriggerLabels {
		if x == l {
			return "trigger_labels"
		}
	}
	for _, x := range f.BlockingLabels {
		if x == l {
			return "blocking_labels"
		}
	}
	return "priority_labels"
}

// lineOf finds the line and column of the value at path in a mapping;
// 0, 0 when not found.
func lineOf(n *yaml.Node, path []string) (line, column int) {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for len(path) > 0 {
		if n.Kind != yaml.MappingNode {
			return n.Line, n.Column
		}
		found := false
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == path[0] {
				n, path, found = n.Content[i+1], path[1:], true
				break
			}
		}
		if !found {
			return 0, 0
		}
	}
	return n.Line, n.Column
}

// Bounds of a train's settings: a group merges at most MaxBatchSize pull
// requests, at most MaxParallel groups test at once, and a failed group is
// run again at most MaxRetries times before it is split.
const (
	MaxBatchSize = 32
	MaxParallel  = 32
	MaxRetries   = 3
)

// Update methods of a branch behind a base that requires up-to-date
// branches.
const (
	UpdateMerge  = "merge"  // GitHub's REST update-branch: the base merged into the head
	UpdateRebase = "rebase" // GraphQL updatePullRequestBranch REBASE: the head rebased onto the base
)

// ParseBatchWait reads batch_wait: a Go duration ("30s", "5m"), or 0 for
// no wait (rules.NoBatchWait).
func ParseBatchWait(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return rules.NoBatchWait, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 30s or 5m, or 0")
	}
	if d == 0 {
		return rules.NoBatchWait, nil
	}
	return d, nil
}

// ParseTimeout reads check_timeout: a Go duration ("90m", "1h30m"), or
// 0 / "never" to wait forever.
func ParseTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "never" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 30m or 2h, or never")
	}
	return d, nil
}
