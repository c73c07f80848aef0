package policy

import (
	"fmt"
	"strings"
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

// CheckTemplate reports a placeholder the template names that does not
// exist, or a brace left open.
func CheckTemplate(tpl string) error {
	_, err := render(tpl, CommitInfo{})
	return err
}

// Render fills tpl's {placeholders} from c ({{ and }} are literal braces).
func Render(tpl string, c CommitInfo) string {
	out, _ := render(tpl, c)
	return out
}

func render(tpl string, c CommitInfo) (string, error) {
	var b strings.Builder
	for i := 0; i < len(tpl); i++ {
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
				fmt.Fprint(&b, c.Number)
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
