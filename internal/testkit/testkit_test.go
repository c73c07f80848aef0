package testkit_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit"
)

// Only tests import testkit: no file of the binary may, so that what the
// tests share never ships.
func TestImportedOnlyFromTests(t *testing.T) {
	root := filepath.Dir(testkit.Testdata())
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/mergegate/mergegate/internal/testkit" {
				t.Errorf("%s imports testkit; only _test.go files may", path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestTestdataIsTheRepositorys(t *testing.T) {
	if m := testkit.Payload(t, "pull_request/labeled.payload.json"); m["action"] != "labeled" || m["installation"] == nil {
		t.Fatalf("payload = action %v, installation %v", m["action"], m["installation"])
	}
}
