package lifecycle

import "strings"

// Inert is text someone else chose (a check's name, a status's context)
// made inert in GitHub's Markdown, where mergegate's comments and check
// run summaries quote it: a zero-width space after @ (no mention pings
// anyone), # (no reference links or notifies an issue), < (no HTML) and
// the ] of ]( (no link), and inside :// and www. (no autolink). It reads
// the same, in Markdown and in plain text.
func Inert(s string) string { return inertReplacer.Replace(s) }

const zwsp = "\u200b"

var inertReplacer = strings.NewReplacer(
	"@", "@"+zwsp,
	"#", "#"+zwsp,
	"<", "<"+zwsp,
	"](", "]"+zwsp+"(",
	"://", ":"+zwsp+"//",
	"www.", "www"+zwsp+".",
)
