// Package pgtest gives a test a PostgreSQL database of its own: a fresh
// schema on the server MERGEGATE_TEST_POSTGRES names (scripts/with-postgres
// starts one; .ci/run does), dropped when the test ends. It depends on no
// package of ours, so that leasedo's own tests can use it.
//
// Without the variable the test is skipped, saying so, unless CI=true:
// then it fails, since CI asked for PostgreSQL and did not get it.
//
// Files:
//   - pgtest.go: Server, URL and WithSearchPath: a schema of the test's own.
//   - proxy.go: Proxy, a TCP proxy in front of the server, for database
//     faults at exact moments (connections cut, commits cut).
package pgtest
