package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Dockerfile and compose.yaml set only variables that a flag reads,
// their HEALTHCHECK runs a real command, and the admin listener they open
// to the network always comes with a token (serve refuses otherwise).
func TestContainerFilesUseRealSettings(t *testing.T) {
	known := map[string]bool{}
	for _, s := range allSettings() {
		if s.env != "" {
			known[s.env] = true
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	vars := regexp.MustCompile(`\b((?:MERGEGATE|GITHUB)_[A-Z_]+)[=:]`)
	for _, name := range []string{"Dockerfile", "compose.yaml"} {
		text := read(name)
		for _, m := range vars.FindAllStringSubmatch(text, -1) {
			if !known[m[1]] {
				t.Errorf("%s sets %s, which no flag reads", name, m[1])
			}
		}
		if strings.Contains(text, "MERGEGATE_ADMIN_ADDR: 0.0.0.0") && !strings.Contains(text, "MERGEGATE_ADMIN_TOKEN:") {
			t.Errorf("%s opens the admin listener without a token", name)
		}
	}
	docker := read("Dockerfile")
	if !strings.Contains(docker, `CMD ["/usr/local/bin/mergegate", "healthcheck"]`) {
		t.Error("the Dockerfile's HEALTHCHECK is not mergegate healthcheck")
	}
	if _, ok := commandHelp["healthcheck"]; !ok {
		t.Error("no healthcheck command")
	}
	if !strings.Contains(docker, "MERGEGATE_ADMIN_ADDR=127.0.0.1:8081") {
		t.Error("the image's admin listener is not on loopback by default")
	}
}
