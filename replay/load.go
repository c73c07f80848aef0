package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mergegate/mergegate/app"
)

// ScenarioFile is the optional file beside recorded deliveries that says
// what the deliveries cannot: the base branches' protection and which pull
// requests start behind their base. A folder's scenario.json is read with
// its deliveries; a file of that name given on the command line is too.
const ScenarioFile = "scenario.json"

// GoldenSuffix marks expected-output files kept beside the deliveries of a
// scenario (testdata/scenarios/*/expected.golden): replay passes over them.
const GoldenSuffix = ".golden"

// Scenario is the world an offline replay cannot read from the payloads.
//
//	{
//	  "required": {"master": {"contexts": ["ci/build"], "strict": true}},
//	  "behind": [2]
//	}
//
// Required is per base branch, for every repository of the replay: the
// branch protection's required status checks ("contexts") and "require
// branches to be up to date" ("strict"). Without it no check is required,
// so every check reported on a sha is. Behind lists the pull
// requests whose head starts behind its base (a push to the base branch
// also puts the open pull requests of that base behind).
type Scenario struct {
	Required map[string]ScenarioRequired `json:"required,omitempty"`
	Behind   []int                       `json:"behind,omitempty"`
	// Files are files on every repository's default branch (by path),
	// e.g. ".github/mergegate.yml"; Roles, users' roles on every
	// repository (read, triage, write, maintain, admin; others read).
	Files map[string]string `json:"files,omitempty"`
	Roles map[string]string `json:"roles,omitempty"`
}

// ScenarioRequired is one branch's required checks.
type ScenarioRequired struct {
	Contexts []string `json:"contexts"`
	Strict   bool     `json:"strict"`
}

// Input is what Load read: the deliveries in replay order, the
// file each came from, and the scenario.
type Input struct {
	Deliveries []app.Recorded
	Files      []string // Files[i] holds Deliveries[i]
	Scenario   Scenario
}

// BadInputError names a file that is not a recorded delivery (or not a
// scenario) and says why.
type BadInputError struct {
	File string
	Why  string
}

func (e *BadInputError) Error() string { return e.File + ": " + e.Why }

// Load reads recorded deliveries from files and folders, in the order
// given; a folder's files in name order, which for `serve --record` is
// arrival order. In a folder, sub-folders, hidden files and *.golden files
// are passed over, and scenario.json is the scenario. Any other file that
// is not a recorded delivery (a README.md, a .txt, JSON of another shape) is
// returned in skipped, each naming the file and why; with strict the first
// one is the error instead. A path that cannot be read is always an error.
func Load(paths []string, strict bool) (in Input, skipped []error, err error) {
	type candidate struct {
		path     string
		explicit bool
	}
	var files []candidate
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return in, nil, err
		}
		if !st.IsDir() {
			files = append(files, candidate{p, true})
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return in, nil, err
		}
		var names []string
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, GoldenSuffix) {
				continue
			}
			names = append(names, name)
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, candidate{filepath.Join(p, n), false})
		}
	}
	scenarios := 0
	for _, f := range files {
		if filepath.Base(f.path) == ScenarioFile {
			sc, err := ReadScenario(f.path)
			if err != nil {
				return in, nil, err // a scenario that cannot be read would change the answer
			}
			if scenarios++; scenarios > 1 {
				return in, nil, &BadInputError{File: f.path, Why: "a second " + ScenarioFile + " (give one scenario per replay)"}
			}
			in.Scenario = sc
			continue
		}
		rec, err := ReadRecorded(f.path)
		if err != nil {
			if strict {
				return in, nil, err
			}
			skipped = append(skipped, err)
			continue
		}
		in.Deliveries = append(in.Deliveries, rec)
		in.Files = append(in.Files, f.path)
	}
	return in, skipped, nil
}

// ReadRecorded reads one recorded delivery (docs/replay.md): a JSON object with a
// non-empty "event" and "delivery" and a "payload" object. Any other file
// answers a *BadInputError that names it.
func ReadRecorded(path string) (app.Recorded, error) {
	var rec app.Recorded
	bad := func(format string, args ...any) (app.Recorded, error) {
		return app.Recorded{}, &BadInputError{File: path, Why: "not a recorded delivery: " + fmt.Sprintf(format, args...)}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return app.Recorded{}, err
	}
	trimmed := bytes.TrimSpace(b)
	switch {
	case len(trimmed) == 0:
		return bad("the file is empty")
	case trimmed[0] != '{':
		if !strings.HasSuffix(path, ".json") {
			return bad("not a .json file")
		}
		return bad("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(&rec); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.ErrUnexpectedEOF):
			return bad("invalid JSON: the file ends in the middle of a value (truncated?)")
		case errors.As(err, &se):
			return bad("invalid JSON at byte %d: %v", se.Offset, err)
		case errors.As(err, &te):
			return bad("field %q has the wrong type (%s, want %s)", te.Field, te.Value, te.Type)
		}
		return bad("%v", err)
	}
	if dec.More() {
		return bad("more than one JSON value")
	}
	payload := bytes.TrimSpace(rec.Payload)
	switch {
	case rec.Event == "":
		var bare struct{ Repository, Sender, Installation json.RawMessage }
		if json.Unmarshal(trimmed, &bare) == nil && (bare.Repository != nil || bare.Sender != nil || bare.Installation != nil) {
			return bad(`no "event": this looks like a bare webhook payload; a recorded delivery wraps it as {"event", "delivery", "headers", "payload"}`)
		}
		return bad(`no "event" (want {"event", "delivery", "headers", "payload"})`)
	case rec.Delivery == "":
		return bad(`no "delivery" id`)
	case len(payload) == 0 || string(payload) == "null":
		return bad(`no "payload"`)
	case payload[0] != '{':
		return bad(`"payload" is not a JSON object`)
	}
	return rec, nil
}

// ReadScenario reads a scenario.json; unknown fields are an error (a typo
// would silently change the world).
func ReadScenario(path string) (Scenario, error) {
	var sc Scenario
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return sc, &BadInputError{File: path, Why: "not a scenario (" + `{"required": {"BRANCH": {"contexts": [...], "strict": true}}, "behind": [PR numbers], "files": {"PATH": "CONTENT"}, "roles": {"LOGIN": "write"}}` + "): " + err.Error()}
	}
	for _, n := range sc.Behind {
		if n <= 0 {
			return sc, &BadInputError{File: path, Why: fmt.Sprintf("behind: %d is not a pull request number", n)}
		}
	}
	return sc, nil
}
