package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mergegate/mergegate/policy"
)

// validateCmd checks policy files as the server reads them (policy.Parse,
// the one parser the sync uses) and prints each problem as
// FILE:LINE:COLUMN: PROBLEM, the form editors and CI annotations read.
func validateCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "validate")
	if _, err := parseSettings(fs, nil, args); err != nil {
		return err
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	stdinUsed := false
	var bad, problems int
	for _, file := range files {
		name := file
		var content []byte
		var err error
		if file == "-" {
			if stdinUsed {
				return usageError{errors.New("standard input (-) can be read once")}
			}
			stdinUsed, name = true, "<stdin>"
			content, err = io.ReadAll(stdin)
		} else {
			content, err = os.ReadFile(file)
		}
		if err != nil {
			fmt.Fprintf(stderr, "mergegate validate: %v\n", err)
			bad++
			continue
		}
		_, ps := policy.Parse(name, content)
		if len(ps) == 0 {
			fmt.Fprintf(stdout, "%s: no problems\n", name)
			continue
		}
		bad++
		problems += len(ps)
		for _, p := range ps {
			fmt.Fprintln(stdout, problemLine(name, content, p))
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s of %d refused (%s): the server keeps the policy in force until a file is fixed", plural(bad, "file"), len(files), plural(problems, "problem"))
	}
	return nil
}

// problemLine is FILE:LINE:COLUMN: PROBLEM, or FILE: PROBLEM for one about
// the whole file.
func problemLine(name string, content []byte, p policy.Problem) string {
	if p.Line <= 0 {
		return name + ": " + p.Msg
	}
	return fmt.Sprintf("%s:%d:%d: %s", name, p.Line, column(content, p), p.Msg)
}

// column finds where on its line problem p points: the value of the key
// it names, or the key itself when the key is what is wrong (unknown, set
// twice) or its value is on another line; else the line's first node;
// else 1 (a YAML syntax error, whose position yaml.v3 gives by line only).
func column(content []byte, p policy.Problem) int {
	var doc yaml.Node
	if yaml.Unmarshal(content, &doc) != nil {
		return 1
	}
	last := p.Key
	if i := strings.LastIndexByte(last, '.'); i >= 0 {
		last = last[i+1:]
	}
	first := 0
	var found int
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n == nil || found != 0 {
			return
		}
		if n.Line == p.Line && n.Kind != yaml.DocumentNode && (first == 0 || n.Column < first) {
			first = n.Column
		}
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Line == p.Line && last != "" && k.Value == last {
					keyWrong := strings.HasPrefix(p.Msg, "unknown key") || strings.Contains(p.Msg, "is set twice")
					if keyWrong || v.Line != p.Line {
						found = k.Column
					} else {
						found = v.Column
					}
					return
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	switch {
	case found != 0:
		return found
	case first != 0:
		return first
	}
	return 1
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
