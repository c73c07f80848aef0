package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/migrations"
)

// runnableBlock is a shell block of README.md or docs/*.md opened with
// "```sh runnable": it runs offline, as written, against a mergegate just
// started on a new database (its ports swapped in for 8080 and 8081), with
// this binary first on PATH as mergegate and the repository as the working
// folder. A block that names $MERGEGATE_ADMIN_TOKEN runs against a server
// with that token set (and the variable holding it).
var runnableBlock = regexp.MustCompile("(?s)```sh runnable\n(.*?)```")

// expectedPair is a "key": value pair of an answer a block's comment shows
// (# {"locked": false}); every one must be in what the block printed.
var expectedPair = regexp.MustCompile(`"[A-Za-z_]+": ("[^"]*"|true|false|null|-?[0-9]+|\[\])`)

func TestRunnableDocBlocks(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed (apt-get install -y curl); CI must run the docs' runnable blocks")
		}
		t.Skip("curl is not installed (apt-get install -y curl): skipping the docs' runnable blocks")
	}
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	n := 0
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range runnableBlock.FindAllStringSubmatch(string(b), -1) {
			n++
			block := m[1]
			t.Run(fmt.Sprintf("%s_block%d", filepath.Base(file), i+1), func(t *testing.T) {
				runBlock(t, root, block)
			})
		}
	}
	if n < 4 {
		t.Fatalf("found %d runnable blocks; README.md, configuration.md and trains.md have some", n)
	}
}

func runBlock(t *testing.T, root, block string) {
	const token = "docs-test-token-0123456789"
	var extra []string
	env := append(testkit.CleanEnv(), "PATH="+filepath.Dir(binPath)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if strings.Contains(block, "$MERGEGATE_ADMIN_TOKEN") {
		extra = append(extra, "--admin-token", token)
		env = append(env, "MERGEGATE_ADMIN_TOKEN="+token)
	}
	s := startServer(t, filepath.Join(t.TempDir(), "m.db"), extra...)
	pub, adm := strings.TrimPrefix(s.Pub, "http://"), strings.TrimPrefix(s.Admin, "http://")
	_, pubPort, _ := strings.Cut(pub, ":")
	_, admPort, _ := strings.Cut(adm, ":")
	script := strings.NewReplacer(":8081", ":"+admPort, ":8080", ":"+pubPort).Replace(block)
	env = append(env, "MERGEGATE_ADDR="+pub, "MERGEGATE_ADMIN_ADDR="+adm)
	cmd := exec.Command("sh", "-c", "set -e\n"+script)
	cmd.Dir, cmd.Env = root, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n--- block:\n%s--- output:\n%s", err, block, out)
	}
	// Every answer the comments show is in the output, and no error is
	// answered that they do not show.
	var shown strings.Builder
	for _, line := range strings.Split(block, "\n") {
		if _, c, ok := strings.Cut(line, "# "); ok {
			shown.WriteString(c + "\n")
		}
	}
	for _, p := range expectedPair.FindAllString(shown.String(), -1) {
		if !strings.Contains(string(out), p) {
			t.Errorf("the output lacks %s, which the block's comments show\n--- block:\n%s--- output:\n%s", p, block, out)
		}
	}
	if got, want := strings.Count(string(out), `"error"`), strings.Count(shown.String(), `"error"`); got > want {
		t.Errorf("the output has %d errors, the block's comments show %d\n--- block:\n%s--- output:\n%s", got, want, block, out)
	}
}

// The docs name the Go that go.mod wants, and the schema version and the
// form `mergegate version` prints.
func TestDocsNameGoAndSchemaVersions(t *testing.T) {
	root := filepath.Join("..", "..")
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	goVersion := "Go " + string(m[1]) + " or newer"
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, name := range []string{"README.md", "docs/operations.md"} {
		if !strings.Contains(read(name), goVersion) {
			t.Errorf("%s does not say %q (go.mod)", name, goVersion)
		}
	}
	want := fmt.Sprintf("# mergegate v1.2.3 (commit 1a2b3c..., go%s, schema version %d)", m[1], migrations.Latest())
	if !strings.Contains(read("docs/operations.md"), want) {
		t.Errorf("docs/operations.md's version line is not %q", want)
	}
}
