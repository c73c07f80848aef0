package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mergegate/mergegate/internal/testkit"
)

// mergegate healthcheck (the image's HEALTHCHECK) answers 0 for a running
// mergegate found through MERGEGATE_ADDR as serve reads it, an
// unspecified host asked on 127.0.0.1, and 1 when nothing answers.
func TestHealthcheckCommand(t *testing.T) {
	s := startServer(t, filepath.Join(t.TempDir(), "m.db"))
	_, port, _ := strings.Cut(strings.TrimPrefix(s.Pub, "http://"), ":")
	check := func(env ...string) (string, int) {
		cmd := exec.Command(binPath, "healthcheck")
		cmd.Env = append(testkit.CleanEnv(), env...)
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	for _, addr := range []string{"0.0.0.0:" + port, ":" + port, "127.0.0.1:" + port} {
		if out, code := check("MERGEGATE_ADDR=" + addr); code != 0 || !strings.Contains(out, "/healthz: 200 OK") {
			t.Errorf("MERGEGATE_ADDR=%s: exit %d, %q", addr, code, out)
		}
	}
	if out, code := check("MERGEGATE_ADDR=" + closedAddr(t)); code != 1 || !strings.Contains(out, "connection refused") {
		t.Errorf("nothing listening: exit %d, %q", code, out)
	}
}
