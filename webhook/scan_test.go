package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// parseEnvelope must agree with encoding/json (the reference decoding in
// translate_ref_test.go): the same inputs are
// malformed, and valid ones give the same three fields.
func checkEnvelope(t testing.TB, body []byte) {
	t.Helper()
	got, err := parseEnvelope(body)
	var e refEnvelope
	want := refDecode(body, &e)
	if want == nil && !json.Valid(body) {
		want = errSyntax
	}
	if (err == nil) != (want == nil) {
		t.Fatalf("parseEnvelope(%q) err = %v, encoding/json err = %v", truncate(body), err, want)
	}
	if err != nil {
		return
	}
	w := e.meta()
	if got.Action != w.Action || got.Tenant != w.Tenant || got.Repo != w.Repo {
		t.Fatalf("parseEnvelope(%q) = %+v, encoding/json = %+v", truncate(body), got, w)
	}
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestParseEnvelopeAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range []string{
		`{}`, ` {"action":"opened"} `, `{"action":"a\"b\u00e9","installation":{"id":42},"repository":{"full_name":"o/r","x":[1,2.5e-3,true,null]}}`,
		`{"act\u0069on":"escaped key"}`, `{"installation":null,"repository":null}`, `{"installation":{"id":0}}`,
		`{"action":"x"`, `{"action":"x"}}`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":tru}`, `{"a":"\x"}`, "{\"a\":\"\x01\"}",
		`[]`, `"str"`, ``, `{"a":[1,]}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"action":1}`, `{"installation":{"id":"7"}}`,
		`{"installation":[]}`, `{"repository":{"full_name":5}}`, `{"installation":{"id":1.5}}`, `{"a":"\ud800"}`,
		`{"action":"first","action":"second"}`, `{"action":"first","action":null}`,
		`{"installation":{"id":5},"installation":{}}`, `{"installation":{"id":5},"installation":null,"installation":{}}`,
		`{"Action":"a","ACTION":"b"}`, `{"in\u017ftallation":{"id":3}}`, "{\"in\u017ftallation\":{\"id\":3}}",
		"{\"repository\":{\"full_name\":\"a\xffb\xed\xa0\x80\"}}",
	} {
		checkEnvelope(t, []byte(s))
	}
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "github-webhooks", "*", "*.json"))
	if len(files) < 50 {
		t.Fatalf("only %d payload examples found", len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checkEnvelope(t, b)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{`{"action":"opened","installation":{"id":1},"repository":{"full_name":"a/b"}}`, `{"a":[{"b":"\u1234"}]}`, `{`, `{"x":1e5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkEnvelope(t, body) })
}

func BenchmarkParseEnvelope24KB(b *testing.B) {
	body := []byte(`{"action":"labeled","number":1,"pull_request":{"body":"` + string(make([]byte, 0)) + strconv.Quote("x")[1:2] + `"},"installation":{"id":1},"repository":{"full_name":"o/r"}}`)
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "github-webhooks", "pull_request", "labeled.with-organization.payload.json"))
	if err == nil {
		body = raw
	}
	b.SetBytes(int64(len(body)))
	b.Run("scanner", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseEnvelope(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := Parse("pull_request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := refParse("pull_request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
