package lifecycle

import (
	"strings"
	"testing"
)

func TestInert(t *testing.T) {
	for in, want := range map[string]string{
		"ci":                              "ci",
		"build (ubuntu-latest, 1.22)":     "build (ubuntu-latest, 1.22)",
		"codecov/patch":                   "codecov/patch",
		"@acme/security-team":             "@\u200bacme/security-team",
		"see [fix](https://evil.example)": "see [fix]\u200b(https:\u200b//evil.example)",
		"octo/app#12":                     "octo/app#\u200b12",
		"<img src=x>":                     "<\u200bimg src=x>",
		"www.evil.example":                "www\u200b.evil.example",
	} {
		got := Inert(in)
		if got != want {
			t.Errorf("Inert(%q) = %q, want %q", in, got, want)
		}
		if strings.ReplaceAll(got, "\u200b", "") != in {
			t.Errorf("Inert(%q) = %q changes more than zero-width spaces", in, got)
		}
	}
}
