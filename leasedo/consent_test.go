package leasedo

import (
	"context"
	"testing"
)

// The store remembers which head a writer's consent is for: a join gives
// it for its head (none for a pull request brought back, until the sync
// knows who did it), a new head leaves it on the old one (a row an older
// mergegate wrote, ”, is pinned there), a writer's join of a queued
// entry gives it again, and SetConsent records the sync's decision.
func TestConsentIsForAHead(t *testing.T) {
	onBackends(t, func(t *testing.T) {
		ctx := context.Background()
		s, _ := newStore(t)
		const a, b, c = "aaaa", "bbbb", "cccc"
		consent := func(pr int) (string, string) {
			t.Helper()
			its, err := s.Items(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range its {
				if it.PRNumber == pr {
					return it.ConsentSha, it.ConsentNote
				}
			}
			t.Fatalf("#%d not queued", pr)
			return "", ""
		}
		mustProcess(t, s, join(1, a))
		if got, _ := consent(1); got != a {
			t.Errorf("joined at %s: consent %q", a, got)
		}
		reev := Event{EventType: "pull_request", Tenant: key.Tenant, Repo: key.Repo, Action: "synchronize", Op: OpReevaluate, PRNumber: 1, Details: &Details{Sha: b}}
		mustProcess(t, s, reev)
		if got, _ := consent(1); got != a {
			t.Errorf("new head %s: consent %q, want it left on %s", b, got, a)
		}
		again := join(1, b)
		again.Details.Consent = ConsentGiven
		mustProcess(t, s, again)
		if got, _ := consent(1); got != b {
			t.Errorf("a writer's join at %s: consent %q", b, got)
		}
		pending := join(2, c)
		pending.Action, pending.Details.Consent = "reopened", ConsentPending
		mustProcess(t, s, pending)
		if got, _ := consent(2); got != NoConsent {
			t.Errorf("reopened: consent %q, want none", got)
		}
		l, err := s.Acquire(ctx, key, "worker")
		if err != nil {
			t.Fatal(err)
		}
		if queued, err := s.SetConsent(ctx, l, 2, NoConsent, "@eve reopened it"); err != nil || !queued {
			t.Fatalf("SetConsent = %v %v", queued, err)
		}
		if got, note := consent(2); got != NoConsent || note != "@eve reopened it" {
			t.Errorf("after SetConsent: %q %q", got, note)
		}
		// A held entry is read again once its consent changes.
		if _, err := s.Block(ctx, l, 2, c, "held: waiting for a writer"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetConsent(ctx, l, 2, c, ""); err != nil {
			t.Fatal(err)
		}
		if its, _ := s.Items(ctx, key); its[1].Status != StatusQueued {
			t.Errorf("after SetConsent of a held entry: status %s, want queued", its[1].Status)
		}
		if queued, err := s.SetConsent(ctx, l, 9, c, ""); err != nil || queued {
			t.Errorf("SetConsent of a pull request not queued = %v %v", queued, err)
		}
		// An older mergegate's row: '' until its head moves, then pinned
		// to the head it had.
		if _, err := s.db.w.ExecContext(ctx, `UPDATE queue SET consent_sha = '' WHERE pr_number = 1`); err != nil {
			t.Fatal(err)
		}
		s.Release(ctx, l) //nolint:errcheck
		reev.Details.Sha = c
		mustProcess(t, s, reev)
		if got, _ := consent(1); got != b {
			t.Errorf("an older row's new head: consent %q, want pinned to %s", got, b)
		}
	})
}
