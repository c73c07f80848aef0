package app

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// At info a delivery is at most one line: one that changed a queue is one
// "delivery applied" line with the keys it is looked up by (delivery,
// tenant, repo, pr, sha, result) and little else; one that changed
// nothing (already queued, a check result recorded, ignored) writes none.
// A line stays short: with a GitHub-sized delivery id and a full sha it
// is under 256 bytes, and the deliveries of this mix average under 200.
func TestAtInfoADeliveryIsAtMostOneShortLine(t *testing.T) {
	h := newHarnessLogging(t, zerolog.InfoLevel, withoutGitHub)
	sha1 := strings.Repeat("a1", 20)
	sha2 := strings.Repeat("b2", 20)
	sent := map[string]string{} // delivery id → what it does
	send := func(what, event string, body []byte) {
		id := fmt.Sprintf("%08x-1f2e-11ef-8a3b-%012x", len(sent)+1, 0xc0ffee) // a GUID, as GitHub's
		sent[id] = what
		if code := h.sendID(event, id, body); code != 202 {
			t.Fatalf("%s answered %d", what, code)
		}
		h.settle()
	}
	send("joined", "pull_request", h.prPayload("labeled", 7, sha1, "automerge"))
	send("already_queued", "pull_request", h.prPayload("labeled", 7, sha1, "automerge"))
	send("gate_recorded", "check_suite", h.fixture("check_suite/completed.payload.json", func(m map[string]any) {
		obj(m, "check_suite")["head_sha"] = sha1
		obj(m, "check_suite")["pull_requests"] = []any{map[string]any{"number": 7, "head": map[string]any{"sha": sha1}}}
	}))
	send("reevaluated", "pull_request", h.prPayload("synchronize", 7, sha2, "automerge"))
	send("ignored", "pull_request", h.prPayload("opened", 8, sha1))

	lines := map[string][]string{} // delivery id → its lines
	var bytes int
	sc := bufio.NewScanner(strings.NewReader(h.logBuf.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %s", sc.Text())
		}
		if id, ok := m["delivery"].(string); ok {
			lines[id] = append(lines[id], sc.Text())
			bytes += len(sc.Bytes()) + 1
		}
	}
	var logged []string
	for id, what := range sent {
		ls := lines[id]
		switch what {
		case "joined", "reevaluated":
			if len(ls) != 1 {
				t.Errorf("%s: %d lines at info, want 1: %q", what, len(ls), ls)
				continue
			}
			logged = append(logged, what)
			var m map[string]any
			json.Unmarshal([]byte(ls[0]), &m) //nolint:errcheck
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if got, want := strings.Join(keys, ","), "delivery,level,message,pr,repo,result,sha,tenant,time"; got != want {
				t.Errorf("%s: keys %s, want %s: %s", what, got, want, ls[0])
			}
			if m["result"] != what || m["message"] != "delivery applied" {
				t.Errorf("%s: line %s", what, ls[0])
			}
			if len(ls[0]) >= 256 {
				t.Errorf("%s: a line of %d bytes, want under 256: %s", what, len(ls[0]), ls[0])
			}
		default:
			if len(ls) != 0 {
				t.Errorf("%s: changed nothing, yet logged at info: %q", what, ls)
			}
		}
	}
	if len(logged) != 2 {
		t.Fatalf("lines for %v, want joined and reevaluated\n%s", logged, h.logBuf.String())
	}
	if per := bytes / len(sent); per >= 200 {
		t.Errorf("%d bytes of log per delivery at info, want under 200", per)
	}
}
