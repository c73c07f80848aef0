package mergegate

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// goFileName is a file name a doc.go mentions: consent.go, dblock_unix.go.
// A name with a folder in front (rules/consent.go) is another package's.
var goFileName = regexp.MustCompile(`[\w./-]+\.go\b`)

// TestPackageDocsNameTheirFiles: each package of the module says, in its
// doc.go, what it is and what each of its files holds, so a newcomer finds
// the sync in reconcile/sync.go without opening every file. It fails on a
// .go file (not _test.go) that its package's doc.go does not name, and on a
// name in a doc.go whose file is gone. A package of one file may keep its
// doc in that file.
func TestPackageDocsNameTheirFiles(t *testing.T) {
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); dir != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
			return filepath.SkipDir
		}
		checkPackageDoc(t, dir)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkPackageDoc(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") && n != "doc.go" {
			files = append(files, n)
		}
	}
	docPath := filepath.ToSlash(filepath.Join(dir, "doc.go"))
	doc, err := os.ReadFile(docPath)
	switch {
	case os.IsNotExist(err) && len(files) <= 1:
		return // no package, or one file that holds its own doc
	case os.IsNotExist(err):
		t.Errorf("%s has %d files and no doc.go: create %s with the package's doc comment (what it is now) and a list naming each file (%s)",
			filepath.ToSlash(dir), len(files), docPath, strings.Join(files, ", "))
		return
	case err != nil:
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, m := range goFileName.FindAllString(string(doc), -1) {
		if !strings.Contains(m, "/") {
			named[m] = true
		}
	}
	present := map[string]bool{}
	for _, f := range files {
		present[f] = true
		if !named[f] {
			t.Errorf("%s is not named in %s: add it to the doc's list of files, with a line saying what it holds",
				filepath.ToSlash(filepath.Join(dir, f)), docPath)
		}
	}
	var gone []string
	for n := range named {
		if !present[n] && n != "doc.go" {
			gone = append(gone, n)
		}
	}
	sort.Strings(gone)
	for _, n := range gone {
		t.Errorf("%s names %s, which is not a file of the package: take it out of the list, or name the file that holds it now (not %s)",
			docPath, n, fmt.Sprintf("%s/%s", filepath.ToSlash(dir), n))
	}
}
