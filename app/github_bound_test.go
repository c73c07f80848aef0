package app

import (
	"fmt"
	"testing"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
)

// A burst across many repositories of one installation (CI finishing
// everywhere at once) runs one engine worker per repository, and yet
// GitHub never sees more than forge.DefaultInstallationConcurrency of the
// installation's requests at once: concurrent requests per token are what
// trips GitHub's secondary rate limit, which would block every repository
// of the installation. Everything still merges.
func TestBurstAcrossReposKeepsInstallationRequestsBounded(t *testing.T) {
	h := newHarness(t)
	// ghinstallation judges token expiry by the wall clock, the fake by
	// the harness's: in step, the installation token is minted once and
	// reused, so the requests below are not serialised behind refreshes.
	h.clock.Set(time.Now())
	const repos = 12
	names := make([]string, repos)
	for i := range names {
		names[i] = fmt.Sprintf("Codertocat/repo-%02d", i)
		h.gh.AddRepo(testTenant, names[i], testBase)
		h.gh.AddPR(names[i], fakegithub.PR{Number: 1, HeadSHA: shaA, BaseRef: testBase, Labels: []string{"automerge"}, Author: "octocat"})
		h.gh.SetCheckRun(names[i], shaA, "ci/build", "completed", "success")
	}
	h.gh.SetLatency(50 * time.Millisecond)
	for _, name := range names {
		h.mustSend("pull_request", h.prPayloadIn(name, "labeled", 1, shaA, "automerge"))
	}
	h.eventually("every repository's merge", func() bool { return len(h.merges()) == repos })
	if peak := h.gh.PeakInFlight(testTenant); peak > forge.DefaultInstallationConcurrency {
		t.Fatalf("GitHub saw %d of the installation's requests at once, want at most %d", peak, forge.DefaultInstallationConcurrency)
	}
}
