// Package testkit holds the helpers that the tests of several packages
// share: a store on a SQLite file in the test's temporary folder, a forge
// client of the fake GitHub's App, GitHub's payload examples from the
// repository's testdata, a log buffer safe for a server's goroutines, and a
// wait for a condition. Only tests import it.
//
// It imports leasedo, forge and internal/fakegithub, so those packages' own
// (internal) tests cannot use it and keep their few helpers; every other
// package's tests use these instead of a copy.
//
// Files:
//   - testkit.go: OpenDB and Store (SQLite in the test's folder), Forge (a
//     client of the fake GitHub's App), Testdata and Payload (GitHub's
//     examples), the log buffer, Eventually, MainWithBinary (a TestMain
//     that builds the binary).
//   - server.go: StartServer, which runs the built binary's `mergegate
//     serve` and reads its log; CleanEnv.
package testkit
