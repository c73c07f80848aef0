package policy

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Placeholders of the merge commit's title and message templates.
var placeholders = []string{"number", "title", "body", "author", "co_authors"}

// CommitInfo fills a template: the pull request's number, title, body,
// author (login) and co-authors ("Co-authored-by: Name <email>" lines).
type CommitInfo struct {
	Number    int
	Title     string
	Body      string
	Author    string
	CoAuthors []string
}

// MaxCommitMessage bounds a rendered title or message: GitHub documents
// no limit for a merge's commit_title and commit_message, so mergegate
// takes 65,536 bytes (a pull request's body is at most 65,536
// characters). Rendering stops there: a template of {body} a thousand
// times costs one message, not a thousand bodies.
const MaxCommitMessage = 65536

// CheckTemplate reports a template over MaxTemplate bytes, a placeholder
// the template names that does not exist, or a brace left open.
func CheckTemplate(tpl string) error {
	if len(tpl) > MaxTemplate {
		return fmt.Errorf("the template is %d bytes long: at most %d", len(tpl), MaxTemplate)
	}
	_, err := render(tpl, CommitInfo{})
	return err
}

// Render fills tpl's {placeholders} from c ({{ and }} are literal braces),
// at most MaxCommitMessage bytes of it (cut at a character's start).
func Render(tpl string, c CommitInfo) string {
	out, _ := render(tpl, c)
	return out
}

// limited is a builder that keeps at most MaxCommitMessage bytes.
type limited struct {
	strings.Builder
	full bool
}

func (b *limited) WriteString(s string) {
	if room := MaxCommitMessage - b.Len(); len(s) > room {
		for room > 0 && !utf8.RuneStart(s[room]) {
			room--
		}
		s, b.full = s[:room], true
	}
	b.Builder.WriteString(s)
}

func (b *limited) WriteByte(c byte) error {
	if b.Len() >= MaxCommitMessage {
		b.full = true
		return nil
	}
	return b.Builder.WriteByte(c)
}

func render(tpl string, c CommitInfo) (string, error) {
	var b limited
	for i := 0; i < len(tpl); i++ {
		if b.full {
			break // the rest would not be kept
		}
		ch := tpl[i]
		switch {
		case ch == '{' && strings.HasPrefix(tpl[i:], "{{"):
			b.WriteByte('{')
			i++
		case ch == '}' && strings.HasPrefix(tpl[i:], "}}"):
			b.WriteByte('}')
			i++
		case ch == '{':
			end := strings.IndexByte(tpl[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("a { is not closed (write {{ for a brace)")
			}
			name := tpl[i+1 : i+end]
			switch name {
			case "number":
				b.WriteString(strconv.Itoa(c.Number))
			case "title":
				b.WriteString(c.Title)
			case "body":
				b.WriteString(c.Body)
			case "author":
				b.WriteString(c.Author)
			case "co_authors":
				b.WriteString(strings.Join(c.CoAuthors, "\n"))
			default:
				return "", fmt.Errorf("unknown placeholder {%s}: want one of {%s}", name, strings.Join(placeholders, "}, {"))
			}
			i += end
		default:
			b.WriteByte(ch)
		}
	}
	return strings.TrimSpace(b.String()), nil
}
