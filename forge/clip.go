package forge

import "unicode/utf8"

// GitHub's limits on the texts mergegate sends, in characters: past them
// GitHub answers 422 and nothing is written. Each text is clipped to its
// limit before it is sent (clip), so that a long policy file's problems or
// a pull request's body never cost an author their check run or comment.
const (
	maxCheckRunTitle   = 1024  // output.title: GitHub documents none; its UI shows one line
	maxCheckRunSummary = 65535 // output.summary ("Create a check run": maximum length 65535 characters)
	maxCommentBody     = 65536 // an issue comment's body ("Body is too long (maximum is 65536 characters)")
	maxCommitMessage   = 65536 // a merge commit's message: GitHub documents none; the comment's limit, for a text a person reads
	maxCommitTitle     = 1024
)

const clipped = "\n\n… (clipped to GitHub's limit)"

// clip returns s cut to at most n characters (runes), on a rune boundary,
// with a line saying so where it was cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	tail := clipped
	if n < 2*utf8.RuneCountInString(clipped) {
		tail = "…"
	}
	keep := n - utf8.RuneCountInString(tail)
	i, count := 0, 0
	for i < len(s) && count < keep {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		count++
	}
	return s[:i] + tail
}
