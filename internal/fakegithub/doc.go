// Package fakegithub is a stateful fake of the part of GitHub's REST API that
// mergegate uses, served by an httptest.Server on loopback.
//
// It speaks GitHub's JSON shapes (checked against GitHub's published
// examples in testdata/github-rest), mints installation tokens for an App
// JWT signed with its own RSA key (so ghinstallation runs unmodified),
// requires an installation token everywhere else, answers GETs with ETags
// (a matching If-None-Match gets a 304 that costs no rate-limit point),
// counts rate-limit points per installation, records what was done (merges,
// branch updates, comments, labels removed, check runs, every call), and can
// be told to fail (Fail) or to be slow (SetLatency).
//
// Tests build the world with AddRepo, AddPR, SetCheckRun, SetStatus,
// SetRequired... and read the results with Merges, Comments, Calls...
// Beside that state, a git model (git.go: commits, trees, three-way
// merges, the git refs and merges routes, protected bases) and a CI
// simulator on the fake's clock (ci.go: SimulateCI, CompleteDueChecks)
// serve merge trains; BaseHistory, Contains and TreeOf read them.
// Every method is safe for concurrent use.
//
// Files:
//   - server.go: Server, New, the middleware (ETags, rate-limit points,
//     latency, requests in flight), SetClock.
//   - routes.go: the routes, named as GitHub's OpenAPI names them (Calls,
//     Fail select by them).
//   - handlers.go: the REST handlers of pull requests, reviews, merges,
//     branch updates, protection, check runs, statuses, comments, labels.
//   - state.go: the world tests build: repositories, pull requests,
//     checks, statuses (AddRepo, AddPR, SetCheckRun, ...).
//   - shapes.go: the JSON builders, in GitHub's shapes.
//   - records.go: what was done, read back (Merges, Comments, Calls, ...).
//   - messages.go: GitHub's messages for refused merges and updates.
//   - faults.go: injected answers (Fault*).
//   - auth.go: the App's JWT and installation tokens.
//   - tokens.go: installation tokens revoked.
//   - secondary.go: GitHub's secondary rate limits.
//   - mutations.go: requests in flight and the mutations served.
//   - rules.go: what a base requires: branch protection and rulesets.
//   - suites.go: check suites, one per (commit, App).
//   - contents.go: repository contents, collaborator permissions,
//     reactions, branch deletion.
//   - issues.go: issue events and the App's installations.
//   - deliveries.go: the App's webhook deliveries and their redelivery.
//   - manifest.go: the GitHub App manifest flow.
//   - graphql.go: the GraphQL endpoint.
//   - mergequeue.go: GitHub's own merge queue (SetMergeQueue).
//   - git.go: the git model: commits, refs, merges, protected bases, and
//     reads that lag writes (Options.StaleRefReads).
//   - gitroutes.go: its routes (git refs, git commits, merges) and their
//     JSON shapes.
//   - gitreads.go: what tests read of it and set on it (BaseHistory,
//     Contains, TreeOf, RefWrites, AllowPush, PushForeign).
//   - tree.go: a commit's files, layered over its parent's.
//   - ci.go: the CI simulator on the fake's clock (SimulateCI,
//     CompleteDueChecks).
package fakegithub
