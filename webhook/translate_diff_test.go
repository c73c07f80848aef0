package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// The scanner-based Parse and Translate must agree with the encoding/json
// ones they replaced (translate_ref_test.go): the same Meta and Translation
// for every input both accept, and an error wrapping ErrMalformed from both
// for every other input. There is no deliberate difference.

// diffEvents are the event types the payload is read as: each one decodes a
// different struct.
var diffEvents = []string{
	"pull_request", "pull_request_review", "check_suite", "check_run", "status", "push",
	"installation", "installation_repositories", "ping", "merge_group",
}

// diffOptions are the trigger settings Translate is compared under.
var diffOptions = []rules.Options{
	rules.DefaultOptions(), {}, {TriggerLabel: "bug"}, {AutoMergeTrigger: true},
	{TriggerLabel: "AutoMerge", AutoMergeTrigger: true},
}

// sameErr fails unless got and want are both nil or both wrap ErrMalformed.
func sameErr(t testing.TB, what string, body []byte, got, want error) bool {
	t.Helper()
	if (got == nil) != (want == nil) || (got != nil && (!errors.Is(got, ErrMalformed) || !errors.Is(want, ErrMalformed))) {
		t.Fatalf("%s(%q): err = %v, encoding/json err = %v", what, truncate(body), got, want)
	}
	return got == nil
}

// checkMatchesReference reads body as each event type (all of them when
// none is given), with Parse and Translate, and compares both with the
// encoding/json reference.
func checkMatchesReference(t testing.TB, body []byte, events ...string) {
	t.Helper()
	if len(events) == 0 {
		events = diffEvents
	}
	for _, event := range events {
		got, err := Parse(event, body)
		want, werr := refParse(event, body)
		if sameErr(t, "Parse "+event, body, err, werr) && got != want {
			t.Fatalf("Parse(%s, %q) = %+v, encoding/json %+v", event, truncate(body), got, want)
		}
		// As the handler stores it (its envelope), with no tenant and
		// repository (needRepo, the installation id from the payload), and
		// with both whatever the payload says.
		deliveries := []leasedo.Delivery{
			{ID: "d", Event: event, Body: body},
			{ID: "d", Event: event, Body: body, Tenant: "7", Repo: "o/r"},
		}
		if werr == nil {
			deliveries = append(deliveries, leasedo.Delivery{ID: "d", Event: event, Body: body,
				Action: want.Action, Tenant: want.Tenant, Repo: want.Repo})
		}
		opts := diffOptions
		if event != "pull_request" {
			opts = opts[:1] // only pull_request's eligibility reads them
		}
		for _, d := range deliveries {
			for _, opt := range opts {
				got, err := Translate(d, opt)
				want, werr := refTranslate(d, opt)
				if sameErr(t, "Translate "+event, body, err, werr) && !reflect.DeepEqual(got, want) {
					t.Fatalf("Translate(%s, %q, %+v)\n got %s\nwant %s", event, truncate(body), opt, mustJSON(got), mustJSON(want))
				}
			}
		}
	}
	checkEnvelope(t, body)
}

// TestTranslateMatchesReferenceOnExamples: every GitHub example, as stored
// (pretty-printed, read as every event type) and compact, and with its
// members repeated (merged, as encoding/json merges a repeated key), read as
// its own event type.
func TestTranslateMatchesReferenceOnExamples(t *testing.T) {
	n := 0
	err := filepath.WalkDir(fixtureDir, func(path string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		rel, _ := filepath.Rel(fixtureDir, path)
		rel = filepath.ToSlash(rel)
		event, _, _ := strings.Cut(strings.TrimPrefix(rel, "ghes-35/"), "/")
		body := readFixture(t, rel)
		checkMatchesReference(t, body)
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			t.Fatal(err)
		}
		checkMatchesReference(t, buf.Bytes(), event)
		// Repeat the whole body's members after themselves, then after an
		// edited copy: a repeated key merges objects and arrays.
		inner := bytes.TrimSpace(buf.Bytes())
		inner = inner[1 : len(inner)-1]
		if len(inner) > 0 {
			checkMatchesReference(t, []byte("{"+string(inner)+","+string(inner)+"}"), event)
			edited := strings.NewReplacer(`"sha":"`, `"sha":"x`, `"name":"`, `"name":"auto`, `"number":`, `"number":1`,
				`"draft":false`, `"draft":true`, `"auto_merge":null`, `"auto_merge":{}`, `"labels":[`, `"labels":[{"name":"automerge"},`).
				Replace(string(inner))
			checkMatchesReference(t, []byte("{"+edited+","+string(inner)+"}"), event)
			checkMatchesReference(t, []byte("{"+string(inner)+","+edited+"}"), event)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("only %d examples", n)
	}
}

// nested is a value nested depth levels deep (arrays), inside key.
func nested(key string, depth int) string {
	return `{"` + key + `":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
}

// diffEdgeCases are hand-made payloads around what encoding/json accepts.
func diffEdgeCases() []string {
	pr := func(fields string) string {
		return `{"action":"labeled","installation":{"id":1},"repository":{"full_name":"o/r"},"pull_request":{` + fields + `}}`
	}
	open := `"number":5,"state":"open","head":{"sha":"abc"},"base":{"ref":"main"}`
	cases := []string{
		// Not an object, not JSON, trailing garbage, white space.
		``, ` `, `null`, `[]`, `[{"action":"opened"}]`, `"x"`, `1`, `true`, `{`, `}`, `{}`, ` {} `, "\t{}\r\n",
		`{}x`, `{}{}`, `{} {}`, `{},`, "\ufeff{}", `{"a":1}}`, `{"a":}`, `{"a" 1}`, `{a:1}`, `{'a':1}`,
		`{"a":1,}`, `{,"a":1}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`,
		`{"a":+1}`, `{"a":1e}`, `{"a":tru}`, `{"a":nul}`, `{"a":NaN}`, `{"a":"\x"}`, `{"a":"\u12"}`,
		"{\"a\":\"\x01\"}", "{\"a\":\"\x7f\xff\"}", "{\"a\x00\":1}", `{"a":"`, `{"a`, "{\"action\":\"opened\"}\x00",
		// Nulls and missing fields, at every level.
		`{"action":null}`, `{"installation":null,"repository":null}`, `{"installation":{}}`, `{"installation":{"id":null}}`,
		`{"installation":{"id":0}}`, `{"installation":{"id":-0}}`, `{"installation":{"id":-7}}`,
		pr(open), pr(`"number":null`), pr(`"number":0`), pr(`"number":-1`), `{"action":"opened","pull_request":null}`,
		pr(open + `,"labels":null`), pr(open + `,"labels":[null]`), pr(open + `,"labels":[{"name":null}]`),
		pr(open + `,"labels":[{}]`), pr(open + `,"labels":[]`), pr(open + `,"auto_merge":null`),
		pr(open + `,"auto_merge":{}`), pr(open + `,"auto_merge":{"merge_method":null}`), pr(open + `,"head":null`),
		pr(open + `,"base":null`), pr(open + `,"draft":null`), pr(open + `,"state":null`),
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":null}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":null}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":0}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":"x"}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":[]}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":{"ref":{"from":"x"}}}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":1,"base":null}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":null,"base":false}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":1},"changes":{}}`,
		`{"action":"edited","pull_request":{"number":1,"state":"open"},"changes":{"base":1},"changes":null,"changes":{}}`,
		// Wrong types, in every field read.
		`{"action":1}`, `{"action":true}`, `{"action":{}}`, `{"action":[]}`, `{"installation":1}`, `{"installation":"1"}`,
		`{"installation":[]}`, `{"installation":{"id":"1"}}`, `{"installation":{"id":1.5}}`, `{"installation":{"id":1e2}}`,
		`{"installation":{"id":5.0}}`, `{"installation":{"id":1E2}}`, `{"installation":{"id":9223372036854775807}}`,
		`{"installation":{"id":9223372036854775808}}`, `{"installation":{"id":-9223372036854775808}}`,
		`{"installation":{"id":-9223372036854775809}}`, `{"installation":{"id":true}}`, `{"installation":{"id":{}}}`,
		`{"repository":{"full_name":5}}`, `{"repository":"o/r"}`, `{"repository":[]}`,
		pr(`"number":"5"`), pr(`"number":5.0`), pr(`"number":1e2`), pr(`"number":-0`), pr(`"number":true`),
		pr(open + `,"state":1`), pr(open + `,"draft":"false"`), pr(open + `,"draft":0`), pr(open + `,"draft":true`),
		pr(open + `,"labels":{}`), pr(open + `,"labels":"automerge"`), pr(open + `,"labels":["automerge"]`),
		pr(open + `,"labels":[{"name":1}]`), pr(open + `,"labels":[[]]`), pr(open + `,"labels":[1]`),
		pr(open + `,"labels":[{"name":"a"},5]`), pr(open + `,"auto_merge":true`), pr(open + `,"auto_merge":[]`),
		pr(open + `,"auto_merge":{"merge_method":1}`), pr(open + `,"auto_merge":{"merge_method":"squash"}`),
		pr(open + `,"head":"abc"`), pr(open + `,"head":{"sha":1}`), pr(open + `,"base":{"ref":[]}`),
		pr(open) + "x", `{"action":"opened","pull_request":[]}`, `{"action":"opened","pull_request":"x"}`,
		`{"action":"labeled","label":"automerge","pull_request":{"number":1}}`, `{"label":{"name":2}}`, `{"label":[]}`,
		`{"action":"completed","check_suite":{"head_sha":1}}`, `{"action":"completed","check_suite":{"head_sha":"s","pull_requests":{}}}`,
		`{"action":"completed","check_suite":{"head_sha":"s","pull_requests":[{"number":"1"}]}}`,
		`{"action":"completed","check_suite":{"head_sha":"s","pull_requests":[null,{"number":2}]}}`,
		`{"action":"completed","check_run":{"head_sha":"s","pull_requests":[{"number":3}]}}`, `{"check_run":5}`,
		`{"action":"completed","check_run":{"head_sha":"s","pull_requests":[{"number":3.5}]}}`,
		`{"sha":5}`, `{"sha":"s","state":5}`, `{"sha":"s","state":"success"}`, `{"ref":5}`, `{"after":false}`,
		`{"deleted":"true"}`, `{"ref":"refs/heads/main","after":"0000","deleted":false}`,
		`{"ref":"refs/heads/main","after":"1234","deleted":null}`, `{"ref":"refs/tags/v1","after":"1234"}`,
		`{"action":"created","installation":{"id":1},"repositories":{}}`, `{"action":"created","installation":{"id":1},"repositories":[1]}`,
		`{"action":"created","installation":{"id":1},"repositories":[{"full_name":1}]}`,
		`{"action":"added","installation":{"id":1},"repositories_added":[{"full_name":"a/b"},null,{},{"full_name":""}],"repositories_removed":null}`,
		`{"action":"removed","installation":{"id":1},"repositories_removed":[{"full_name":"a/b"}],"repositories_removed":[{}]}`,
		// Escapes, case and Unicode in keys and values.
		pr(open + `,"labels":[{"name":"auto\u006derge"}]`), pr(open + `,"labels":[{"name":"AutoMerge"}]`),
		pr(open + `,"labels":[{"name":"auto\"merge"}]`), pr(open + `,"labels":[{"na\u006de":"automerge"}]`),
		pr(open + `,"labels":[{"NAME":"automerge"}]`), pr(open + `,"LABELS":[{"Name":"automerge"}]`),
		pr(open + `,"labels":[{"name":"automerge\u0000"}]`), pr(open + `,"labels":[{"name":"\ud83d\ude00"}]`),
		pr(open + `,"labels":[{"name":"\ud800"}]`), pr(open + `,"labels":[{"name":"\udc00\ud800x"}]`),
		pr(open + `,"labels":[{"name":"auto\/merge"}]`), pr(open + `,"Auto_Merge":{}`), pr(open + `,"auto_MERGE":{}`),
		`{"ACTION":"opened","Pull_Request":{"NUMBER":3,"State":"open","Head":{"SHA":"x"}},"INSTALLATION":{"ID":9}}`,
		`{"action":"opened","pull_request":{"number":3,"\u017ftate":"open","draft":false}}`,
		"{\"action\":\"opened\",\"pull_request\":{\"number\":3,\"\u017ftate\":\"open\"}}",
		"{\"action\":\"completed\",\"chec\u212a_suite\":{\"head_\u017fha\":\"x\"}}",
		"{\"action\":\"opened\",\"pull_request\":{\"number\":3,\"\u0130state\":\"open\"}}",
		"{\"action\":\"opened\",\"pull_request\":{\"number\":3,\"state\":\"op\xffen\"}}",
		"{\"action\":\"op\xc3\",\"sha\":\"\xed\xa0\x80\",\"state\":\"\xef\xbf\xbd\"}",
		"{\"a\xff\":1,\"acti\xc3\xb3n\":2,\"action\":\"\xe2\x82\"}",
		`{"action":"opened","action":"closed"}`, `{"action":"opened","action":null}`, `{"action":null,"action":"x"}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","draft":true,"draft":null,"labels":[{"name":"automerge"}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open"},"pull_request":{"labels":[{"name":"automerge"}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open"},"pull_request":null,"pull_request":{"labels":[{"name":"automerge"}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","head":{"sha":"a"},"head":{"ref":"x"},"head":null}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","auto_merge":{},"auto_merge":null}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","auto_merge":null,"auto_merge":{}}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"automerge"},{"name":"b"}],"labels":[{}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"b"},{"name":"automerge"}],"labels":[{}],"labels":[{},{}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"b"},{"name":"automerge"}],"labels":[],"labels":[{},{}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"a"},{"name":"b"},{"name":"automerge"}],"labels":[{}],"labels":[{},{},{}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"automerge"}],"labels":[{}],"labels":[{},{},{},{}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"automerge"}],"labels":[{}],"labels":[null,null,null,null,null]}}`,
		`{"action":"labeled","pull_request":{"number":1,"state":"open","labels":[{"name":"automerge"}],"labels":null,"labels":[{}]}}`,
		`{"action":"completed","check_suite":{"head_sha":"s","pull_requests":[{"number":4},{"number":5}]},"check_suite":{"pull_requests":[{}]}}`,
		`{"action":"created","installation":{"id":1},"repositories":[{"full_name":"a/b"},{"full_name":"c/d"}],"repositories":[{},{}],"repositories":[{"full_name":""}]}`,
		// Deep nesting: encoding/json's limit is 10000 levels.
		nested("x", 9999), nested("x", 10000), nested("pull_request", 10000), nested("labels", 3),
		`{"x":` + strings.Repeat(`{"a":`, 9999) + `1` + strings.Repeat(`}`, 9999) + `}`,
		`{"x":` + strings.Repeat(`{"a":`, 10000) + `1` + strings.Repeat(`}`, 10000) + `}`,
		`{"pull_request":{"number":1,"x":` + strings.Repeat("[", 9998) + strings.Repeat("]", 9998) + `}}`,
		`{"pull_request":{"number":1,"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}}`,
		`{"action":"labeled","pull_request":{"number":1,"labels":[` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `]}}`,
		`{"action":"labeled","pull_request":{"number":1,"labels":[{"x":` + strings.Repeat("[", 9996) + strings.Repeat("]", 9996) + `}]}}`,
		`{"action":"labeled","pull_request":{"number":1,"labels":[{"x":` + strings.Repeat("[", 9997) + strings.Repeat("]", 9997) + `}]}}`,
	}
	// Numbers of every form in every number field.
	for _, n := range []string{"1", "-0", "0", "5.0", "1e2", "1E+2", "-1", "0.5", "12345678901234567890", "2147483648"} {
		cases = append(cases,
			pr(`"state":"open","number":`+n),
			`{"installation":{"id":`+n+`}}`,
			`{"action":"completed","check_run":{"head_sha":"s","pull_requests":[{"number":`+n+`}]}}`)
	}
	return cases
}

func TestTranslateMatchesReferenceOnEdgeCases(t *testing.T) {
	for _, c := range diffEdgeCases() {
		checkMatchesReference(t, []byte(c))
	}
}

// FuzzTranslateMatchesReference: on arbitrary bytes, read as every event
// type, Parse, Translate and parseEnvelope agree with encoding/json.
func FuzzTranslateMatchesReference(f *testing.F) {
	for _, file := range []string{
		"pull_request/opened.payload.json", "pull_request/labeled.payload.json", "pull_request/unlabeled.payload.json",
		"pull_request_review/submitted.payload.json", "ghes-35/check_suite/completed.json",
		"check_run/completed.payload.json", "status/with-installation.payload.json", "push/with-new-branch.payload.json",
		"installation/created.payload.json", "installation_repositories/added.payload.json",
	} {
		f.Add(slimFixture(f, file))
	}
	for _, c := range diffEdgeCases() {
		if len(c) < 2000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkMatchesReference(t, body) })
}
