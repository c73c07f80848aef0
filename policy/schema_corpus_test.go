package policy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate/policy"
)

// The schema (what an editor checks while the file is written) and the
// parser (what the server reads) judge every file of testdata/policy
// alike: good/ is accepted by both, bad/ refused by both, and the parser's
// problem says what the file's "# want:" line says.
func TestSchemaAndParserAgreeOnCorpus(t *testing.T) {
	schema := compileSchema(t)
	for _, dir := range []string{"good", "bad"} {
		files, err := filepath.Glob(filepath.Join("..", "testdata", "policy", dir, "*.yml"))
		if err != nil || len(files) < 5 {
			t.Fatalf("testdata/policy/%s: %d files, %v", dir, len(files), err)
		}
		for _, file := range files {
			t.Run(dir+"/"+filepath.Base(file), func(t *testing.T) {
				content, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				_, problems := policy.Parse(filepath.Base(file), content)
				schemaErr := validateSchema(schema, content)
				if dir == "good" {
					if len(problems) > 0 {
						t.Errorf("the parser refuses it: %v", problems)
					}
					if schemaErr != nil {
						t.Errorf("the schema refuses it: %v", schemaErr)
					}
					return
				}
				if len(problems) == 0 {
					t.Error("the parser accepts it")
				} else if want := wantOf(content); !strings.Contains(problems.Error(), want) {
					t.Errorf("the parser says %q, want it to say %q", problems.Error(), want)
				}
				if schemaErr == nil {
					t.Error("the schema accepts it")
				}
			})
		}
	}
}

// wantOf is a corpus file's "# want: TEXT" line.
func wantOf(content []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(content))
	for sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			return w
		}
	}
	return "(no # want: line)"
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "mergegate.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource(head.ID, bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(head.ID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validateSchema reads content as YAML, as an editor's YAML language
// server does, and checks the result against the schema. A file that is
// not YAML fails here as it does for the editor.
func validateSchema(s *jsonschema.Schema, content []byte) error {
	var doc any
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return err
	}
	if doc == nil {
		doc = map[string]any{} // an empty file: the defaults
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // the validator's own reading of JSON numbers
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return s.Validate(v)
}

// The schema's $id is the address docs/configuration.md gives editors,
// and it names this very file in this module's repository on its main
// branch (so the address resolves once the file is pushed).
func TestSchemaIDIsTheDocumentedURL(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "mergegate.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		ID string `json:"$id"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module github\.com/(\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod: no module github.com/OWNER/NAME line")
	}
	want := "https://raw.githubusercontent.com/" + string(m[1]) + "/main/docs/mergegate.schema.json"
	if head.ID != want {
		t.Errorf("$id %q, want %q (the module's repository, main branch, this file)", head.ID, want)
	}
	doc, err := os.ReadFile(filepath.Join("..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("$schema="+head.ID)) {
		t.Errorf("docs/configuration.md does not give $schema=%s", head.ID)
	}
	var other []string
	for _, u := range regexp.MustCompile(`https://\S*mergegate\.schema\.json`).FindAll(doc, -1) {
		if string(u) != head.ID {
			other = append(other, string(u))
		}
	}
	if len(other) > 0 {
		t.Errorf("docs/configuration.md gives other addresses of the schema: %v", other)
	}
}
