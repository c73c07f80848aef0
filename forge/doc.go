// Package forge is the only package of mergegate that speaks GitHub.
//
// It wraps go-github (REST) and ghinstallation (GitHub App authentication)
// and exports plain types, so that no go-github type leaks into the rest of
// the program. A tenant is a GitHub App installation id as a decimal string;
// a repo is "owner/name".
//
// Each installation gets its own transport stack:
//
//	go-github → authTransport (a token GitHub refuses is dropped; see auth.go)
//	          → ghinstallation.Transport (installation token, cached and refreshed)
//	          → inflight (at most InstallationConcurrency requests at once; the
//	            Timeout; the write budget, by class; see inflight.go, budget.go)
//	          → rateGuard (refuses to send while rate-limited; see ratelimit.go)
//	          → cacheTransport (ETag conditional GETs; see cache.go)
//	          → Config.Transport (or http.DefaultTransport)
//
// EvaluateGate (gate.go) is the pure evaluation of a PR's required checks.
// The words it returns (PR, Required, Verdict, Refusal, ...) are package
// lifecycle's, kept here as aliases (vocabulary.go).
//
// Files:
//   - client.go: Config, Client and each installation's transport stack.
//   - auth.go: installation tokens GitHub refuses, dropped and reported
//     (AuthFailure).
//   - installations.go: the App's installations and their repositories,
//     the App's own login.
//   - inflight.go: requests in flight per installation, their timeout,
//     the slow ones logged.
//   - budget.go: the write budget per installation, served by class (land,
//     unblock, tell, cosmetic); WriteBudgetError.
//   - ratelimit.go: GitHub's rate limit followed from each answer; no
//     request sent while limited.
//   - cache.go: the ETag cache of conditional GETs.
//   - clip.go: every text clipped to GitHub's limit.
//   - errors.go: GitHub's errors sorted (MergeError, RateLimitError,
//     TransientError, APIError) and the messages an author reads.
//   - pulls.go: pull requests: read, list, merge, update the branch,
//     comment, remove a label.
//   - facts.go: check suites, reviews, merge methods, and RefusalOf, a
//     refusal sorted by whose it is to fix.
//   - checks.go: check results of a sha, and mergegate's own check runs.
//   - required.go: what a base branch requires (branch protection and
//     rulesets).
//   - gate.go: EvaluateGate, pure.
//   - graphql.go: GitHub's GraphQL: rebase a branch, enqueue in and read
//     GitHub's merge queue.
//   - git.go: the git refs and merges routes a merge train builds and
//     lands with.
//   - branches.go: a branch's state before mergegate deletes it.
//   - contents.go: a file of a repository (the policy file).
//   - events.go: when a pull request's merge triggers were set.
//   - deliveries.go: the App's webhook deliveries, listed and redelivered.
//   - manifest.go: a GitHub App made from its manifest (the set-up flow).
//   - vocabulary.go: aliases of lifecycle's words (PR, Verdict, Refusal,
//     ...).
package forge
