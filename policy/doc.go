// Package policy reads a repository's own policy, .github/mergegate.yml,
// and resolves it with the operator's flags (the defaults) into the
// rules.Policy of each base branch. It is pure: reading the file from
// GitHub, caching it and keeping the last good one is the sync's
// (package reconcile). docs/configuration.md documents every key.
//
// Files:
//   - file.go: File and Branch, Parse, every problem with its file:line
//     (what `mergegate validate` prints).
//   - resolve.go: Effective, the file resolved over the flags into each
//     base branch's rules.Policy, and where each value came from.
//   - template.go: the commit message templates: CheckTemplate and Render.
package policy
