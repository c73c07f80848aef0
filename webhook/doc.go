// Package webhook turns a signed GitHub delivery into a stored
// leasedo.Delivery and a stored delivery into /event calls, per
// docs/queue.md and docs/lease-protocol.md.
//
//   - signature.go: Secrets (rotation), Verify and Sign. Only
//     X-Hub-Signature-256 (HMAC-SHA256) is accepted; the legacy SHA-1
//     X-Hub-Signature is never consulted, and an empty secret is a
//     configuration error, never an open door.
//   - handler.go: the POST /webhook handler. It answers 202 only after the
//     Inbox has committed the delivery; processing happens later.
//   - parse.go: Parse, a read of the few fields mergegate needs, and the
//     small payload structs they are decoded into.
//   - translate.go: Translate, from a stored delivery to queue events,
//     installation changes and base-branch pushes.
//   - command.go: FirstCommand, the "@mergegate ..." line of a comment, as
//     GitHub renders it (nothing quoted or in code is a command).
//   - budget.go: Budget, the bytes all request bodies being read may hold
//     at once, process-wide; a request that finds no room waits, then 503.
package webhook
