package main

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mergegate validate says each corpus file's problem where the file's
// "# at: LINE:COLUMN" line says, in FILE:LINE:COLUMN: form, exits 1 on a
// bad file and 0 when every file is good; stdin (none or -) is read too;
// a bad command line is 2.
func TestValidateCommand(t *testing.T) {
	corpus := filepath.Join("..", "..", "testdata", "policy")
	bad, _ := filepath.Glob(filepath.Join(corpus, "bad", "*.yml"))
	good, _ := filepath.Glob(filepath.Join(corpus, "good", "*.yml"))
	if len(bad) < 5 || len(good) < 3 {
		t.Fatalf("corpus: %d bad, %d good files", len(bad), len(good))
	}
	validate := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := run(append([]string{"validate"}, args...), &out, &errOut)
		return out.String(), errOut.String(), code
	}
	for _, f := range bad {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want, at := corpusLine(b, "# want: "), corpusLine(b, "# at: ")
		out, errOut, code := validate(f)
		if code != 1 || !strings.Contains(errOut, "1 file of 1 refused") {
			t.Errorf("%s: exit %d, stderr %q: want 1 and the count", f, code, errOut)
		}
		prefix := f + ":"
		if at != "" {
			prefix += at + ": "
		}
		if !strings.HasPrefix(out, prefix) || !strings.Contains(out, want) {
			t.Errorf("%s: printed %q, want a line starting %q saying %q", f, out, prefix, want)
		}
	}
	out, errOut, code := validate(good...)
	if code != 0 || errOut != "" || strings.Count(out, ": no problems\n") != len(good) {
		t.Errorf("good files: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// One bad among good ones: every file is still read, and the exit is 1.
	out, errOut, code = validate(good[0], bad[0], filepath.Join(t.TempDir(), "missing.yml"))
	if code != 1 || !strings.Contains(out, good[0]+": no problems") || !strings.Contains(out, bad[0]+":") ||
		!strings.Contains(errOut, "missing.yml") || !strings.Contains(errOut, "2 files of 3 refused") {
		t.Errorf("mixed: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code := validate("--strict"); code != 2 || !strings.Contains(errOut, "unknown flag --strict") {
		t.Errorf("unknown flag: exit %d, stderr %q", code, errOut)
	}
}

// With no file, or -, validate reads standard input and names it <stdin>.
func TestValidateReadsStandardInput(t *testing.T) {
	for _, args := range [][]string{{}, {"-"}} {
		var out, errOut bytes.Buffer
		code := validateStdin(t, "merge_method: squash\nfrozen: maybe\n", args, &out, &errOut)
		if code != 1 || out.String() != "<stdin>:2:9: frozen: want true or false, not \"maybe\"\n" {
			t.Errorf("validate %v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := validateStdin(t, "merge_method: squash\n", nil, &out, &errOut); code != 0 || out.String() != "<stdin>: no problems\n" {
		t.Errorf("a good file on stdin: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	if code := validateStdin(t, "", []string{"-", "-"}, &out, &errOut); code != 2 {
		t.Errorf("stdin twice: exit %d", code)
	}
}

func validateStdin(t *testing.T, in string, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	err := validateCmd(args, strings.NewReader(in), stdout, stderr)
	return exitCode(err, "validate", stderr)
}

func corpusLine(b []byte, prefix string) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v
		}
	}
	return ""
}
