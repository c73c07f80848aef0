// Package replay runs recorded webhook deliveries (`serve --record`, docs/replay.md)
// offline: in-process, through the App that `serve` builds, against a fake
// GitHub made from the deliveries themselves, and prints the final state.
// It also reads recordings and their scenario.json (load.go), for the
// online replay too. It is a user feature (`mergegate replay`); the fake
// GitHub and net/http/httptest it needs stay out of package app, which is
// `serve`'s code path.
//
// Files:
//   - replay.go: Options, Offline and the final State it prints (each
//     repository's queue, merges, comments, reactions).
//   - load.go: reading a recording (a folder or files) and its
//     scenario.json: the bases' protection, the pull requests that start
//     behind.
//   - world.go: the fake GitHub made from the deliveries: before each one
//     is handed to mergegate, GitHub looks as the delivery says it did.
package replay
