// Command mergegate-load is mergegate's load generator, kept out of the
// production binary. It sends signed deliveries built from GitHub's payload
// examples (pull_request labeled and synchronize, check_suite completed;
// installation added, repository names varied) to a running mergegate on
// loopback, open loop, and in the same run the same load to a bare handler
// (HMAC check, 202) it starts in-process, and reports the two side by side:
// acknowledgement latency, ingest rate, how fast the deliveries are applied
// and mergegate's memory. It is bounded in count and time and stops by
// itself.
//
//	go run ./cmd/mergegate-load --help
//
// Files:
//   - main.go: flags, their checks, the rounds that alternate the targets.
//   - load.go: runLoad, one target's load: open loop at --rate (or
//     --concurrency closed-loop clients), and warmUp.
//   - send.go: one delivery sent and timed, with recycled buffers.
//   - bare.go: the bare handler (HMAC check, 202) the same load goes to.
//   - stats.go: GET /deliveries/stats polled while the load runs, and the
//     catch-up after it.
//   - hist.go: the latency histogram (log-linear, lock-free).
//   - report.go: the report's figures, and rounds added up.
//   - print.go: the report as text.
package main
