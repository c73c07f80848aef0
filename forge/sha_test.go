package forge_test

import (
	"testing"

	"github.com/mergegate/mergegate/forge"
)

func TestShortSHA(t *testing.T) {
	for sha, want := range map[string]string{
		"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1": "a1a1a1a",
		"a1a1a1a": "a1a1a1a",
		"abc":     "abc",
		"":        "",
	} {
		if got := forge.ShortSHA(sha); got != want {
			t.Errorf("ShortSHA(%q) = %q, want %q", sha, got, want)
		}
	}
}
