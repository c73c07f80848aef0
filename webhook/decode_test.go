package webhook

import (
	"bytes"
	stdjson "encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// decode uses github.com/segmentio/encoding/json for its speed; these
// tests hold it to encoding/json's meaning on the payload structs: the
// same inputs are refused, and accepted ones decode to the same values
// (null, missing fields, repeated keys, case-insensitive names, invalid
// UTF-8 and all).

// payloadTypes are a new value of every struct decode is used with.
var payloadTypes = []func() any{
	func() any { return new(envelope) },
	func() any { return new(prPayload) },
	func() any { return new(checkSuitePayload) },
	func() any { return new(checkRunPayload) },
	func() any { return new(statusPayload) },
	func() any { return new(pushPayload) },
	func() any { return new(installationPayload) },
}

func checkDecodeMatchesEncodingJSON(t testing.TB, body []byte) {
	t.Helper()
	for _, newV := range payloadTypes {
		got, want := newV(), newV()
		err := decode(body, got)
		werr := stdjson.Unmarshal(body, want)
		if werr == nil && !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
			werr = errors.New("not an object")
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("decode(%T, %q) err = %v, want an ErrMalformed", got, truncate(body), err)
		}
		if (err == nil) != (werr == nil) {
			t.Fatalf("decode(%T, %q) err = %v, encoding/json err = %v", got, truncate(body), err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decode(%T, %q) = %+v, encoding/json %+v", got, truncate(body), got, want)
		}
	}
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

var decodeEdgeCases = []string{
	`{}`, ` {"action":"opened"} `, `{"action":"a\"b\u00e9","installation":{"id":42},"repository":{"full_name":"o/r","x":[1,2.5e-3,true,null]}}`,
	`{"act\u0069on":"escaped key"}`, `{"installation":null,"repository":null}`, `{"installation":{"id":0}}`,
	`{"action":"x"`, `{"action":"x"}}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}",
	`[]`, `"str"`, ``, `{"a":[1,]}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"action":1}`, `{"installation":{"id":"7"}}`,
	`{"installation":[]}`, `{"repository":{"full_name":5}}`, `{"installation":{"id":1.5}}`, `{"a":"\ud800"}`,
	`{"action":"first","action":"second"}`, `{"action":"first","action":null}`,
	`{"installation":{"id":5},"installation":{}}`, `{"installation":{"id":5},"installation":null,"installation":{}}`,
	`{"Action":"a","ACTION":"b"}`, `{"in\u017ftallation":{"id":3}}`, "{\"in\u017ftallation\":{\"id\":3}}",
	"{\"repository\":{\"full_name\":\"a\xffb\xed\xa0\x80\"}}",
	`{"pull_request":{"number":1e2}}`, `{"pull_request":{"number":9223372036854775808}}`, `{"pull_request":{"draft":"true"}}`,
	`{"pull_request":{"labels":null}}`, `{"pull_request":{"labels":[{"name":"a"},null]}}`, `{"pull_request":{"auto_merge":{}}}`,
	`{"changes":{"base":null}}`, `{"changes":{"base":{"ref":{"from":"x"}}}}`, `{"changes":{"base":1},"changes":{}}`,
	`{"label":{"name":5}}`, `{"check_suite":{"pull_requests":[{"number":-1}]}}`, `{"deleted":null}`,
	`{"repositories_added":[{"full_name":"a/b"}],"repositories_added":[]}`, `{"sha":"x"} x`,
}

func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeEdgeCases {
		checkDecodeMatchesEncodingJSON(t, []byte(s))
	}
	files, _ := filepath.Glob(filepath.Join(fixtureDir, "*", "*.json"))
	if len(files) < 50 {
		t.Fatalf("only %d payload examples found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkDecodeMatchesEncodingJSON(t, b)
		var buf bytes.Buffer
		if err := stdjson.Compact(&buf, b); err == nil {
			checkDecodeMatchesEncodingJSON(t, buf.Bytes())
		}
	}
}

func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, s := range decodeEdgeCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecodeMatchesEncodingJSON(t, body) })
}
