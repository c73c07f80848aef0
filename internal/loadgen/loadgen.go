// Package loadgen builds the webhook deliveries of a load run from
// GitHub's payload examples (testdata/github-webhooks): signed-ready bodies
// spread over many repositories, each translating into the queue event its
// turn calls for. The load tool (cmd/mergegate-load) sends them; the
// kill -9 test of cmd/mergegate sends the same.
package loadgen

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/mergegate/mergegate/rules"
)

// Generator builds delivery i of a run: repository i%repos; within a
// repository its PRs take turns, each being labeled (join), then pushed to
// (synchronize: reevaluate), then reported on (check_suite completed at the
// new head: gate recorded), round after round, so the queues stay prs long.
type Generator struct {
	repos, prs int
	tenant     string
	run        string // unique per process: delivery ids never repeat across runs
	tmpl       [3]template
}

var events = [3]string{"pull_request", "pull_request", "check_suite"}

// template is a compact payload split at its placeholders.
type template struct {
	parts []tpart
	size  int
}

type tpart struct {
	lit []byte
	v   byte // 0: literal; 'n' PR number, 't' tenant, 'r' repo name, 's' sha
}

const (
	phNum    = "@@NUM@@"
	phTenant = "@@TENANT@@"
	phName   = "@@NAME@@"
	phSHA    = "@@SHA@@"
)

// Org is the owner of every repository a load run names (Org/repo-0000...).
const Org = "bench-org"

// New reads the three payload examples from dir (empty: FindPayloads) and
// returns a Generator over repos repositories of prs pull requests each,
// under installation tenant.
func New(dir string, repos, prs int, tenant int64) (*Generator, error) {
	if dir == "" {
		var err error
		if dir, err = FindPayloads(); err != nil {
			return nil, err
		}
	}
	var nonce [4]byte
	rand.Read(nonce[:]) //nolint:errcheck // never fails
	g := &Generator{repos: repos, prs: prs, tenant: strconv.FormatInt(tenant, 10),
		run: fmt.Sprintf("bench-%d-%s", time.Now().Unix(), hex.EncodeToString(nonce[:]))}
	files := [3]string{"pull_request/labeled.with-organization.payload.json", "pull_request/synchronize.payload.json", "check_suite/completed.payload.json"}
	for i, name := range files {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("payload examples: %w (set --payloads to testdata/github-webhooks)", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("payload example %s: %w", name, err)
		}
		if err := placehold(m, i); err != nil {
			return nil, fmt.Errorf("payload example %s: %w", name, err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		g.tmpl[i] = split(b)
	}
	return g, nil
}

// FindPayloads looks for testdata/github-webhooks from the working
// directory and from the binary's directory upwards.
func FindPayloads() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		for d := s; ; d = filepath.Dir(d) {
			p := filepath.Join(d, "testdata", "github-webhooks")
			if st, err := os.Stat(filepath.Join(p, "pull_request")); err == nil && st.IsDir() {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("payload examples not found: run from the repository or set --payloads to testdata/github-webhooks")
}

func obj(m map[string]any, key string) (map[string]any, error) {
	o, ok := m[key].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no %q object", key)
	}
	return o, nil
}

// placehold puts the placeholders into one example: installation added,
// repository renamed, PR number and head sha variable, PR eligible.
func placehold(m map[string]any, kind int) error {
	m["installation"] = map[string]any{"id": phTenant, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
	repo, err := obj(m, "repository")
	if err != nil {
		return err
	}
	repo["full_name"] = Org + "/" + phName
	repo["name"] = phName
	if owner, err := obj(repo, "owner"); err == nil {
		owner["login"] = Org
	}
	if kind == 2 {
		cs, err := obj(m, "check_suite")
		if err != nil {
			return err
		}
		m["action"] = "completed"
		cs["head_sha"] = phSHA
		cs["status"], cs["conclusion"] = "completed", "success"
		cs["pull_requests"] = []any{}
		return nil
	}
	pr, err := obj(m, "pull_request")
	if err != nil {
		return err
	}
	m["number"], pr["number"] = phNum, phNum
	pr["state"], pr["draft"], pr["auto_merge"] = "open", false, nil
	pr["labels"] = []any{map[string]any{"name": rules.DefaultTriggerLabel}}
	head, err := obj(pr, "head")
	if err != nil {
		return err
	}
	head["sha"] = phSHA
	if kind == 0 {
		m["action"] = "labeled"
		m["label"] = map[string]any{"name": rules.DefaultTriggerLabel}
	} else {
		m["action"] = "synchronize"
		m["after"] = phSHA
	}
	return nil
}

// split cuts a marshalled template at its placeholders. Numbers were
// marshalled as strings: their quotes go with the placeholder.
func split(b []byte) template {
	var t template
	marks := []struct {
		s string
		v byte
	}{{`"` + phNum + `"`, 'n'}, {`"` + phTenant + `"`, 't'}, {phName, 'r'}, {phSHA, 's'}}
	for len(b) > 0 {
		at, which := -1, -1
		for i, mk := range marks {
			if j := bytes.Index(b, []byte(mk.s)); j >= 0 && (at < 0 || j < at) {
				at, which = j, i
			}
		}
		if at < 0 {
			t.parts = append(t.parts, tpart{lit: b})
			t.size += len(b)
			break
		}
		if at > 0 {
			t.parts = append(t.parts, tpart{lit: b[:at]})
			t.size += at
		}
		t.parts = append(t.parts, tpart{v: marks[which].v})
		b = b[at+len(marks[which].s):]
	}
	return t
}

// Delivery returns delivery i: its event, id (from idBase+i: each target
// of a run sends fresh ids) and body (the same for every target).
func (g *Generator) Delivery(idBase, i int64) (event, id string, body []byte) {
	return g.AppendDelivery(nil, idBase, i)
}

// AppendDelivery is Delivery with the body appended to dst[:0], for a
// sender that reuses its buffers.
func (g *Generator) AppendDelivery(dst []byte, idBase, i int64) (event, id string, body []byte) {
	repo := int(i % int64(g.repos))
	n := i / int64(g.repos) // this repository's n-th delivery
	pr := int(n%int64(g.prs)) + 1
	round := n / int64(g.prs)
	kind := int(round % 3)
	gen := round / 3
	// The labeled PR is at its previous synchronize's head; synchronize and
	// check_suite are at this round's new head.
	shaGen := gen*2 + 1
	if kind == 0 {
		shaGen = gen * 2
	}
	sha := fmt.Sprintf("%08x%08x%024x", repo, pr, shaGen)
	name := fmt.Sprintf("repo-%04d", repo)
	t := g.tmpl[kind]
	body = slices.Grow(dst[:0], t.size+64)
	for _, p := range t.parts {
		switch p.v {
		case 0:
			body = append(body, p.lit...)
		case 'n':
			body = strconv.AppendInt(body, int64(pr), 10)
		case 't':
			body = append(body, g.tenant...)
		case 'r':
			body = append(body, name...)
		case 's':
			body = append(body, sha...)
		}
	}
	return events[kind], g.run + "-" + strconv.FormatInt(idBase+i, 10), body
}
