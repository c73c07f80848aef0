package webhook

import (
	"fmt"
	"strings"
	"time"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// CommandPrefix starts a command line in a pull request comment.
const CommandPrefix = "@mergegate"

// Command is the "@mergegate <name> [arg]" line of a comment. Name is
// queue, cancel, refresh or priority (arg high, normal or low); a line
// mergegate does not understand has Name "invalid" and the line as Arg,
// so that its author gets a reply saying what there is.
type Command struct {
	Name, Arg string
}

// FirstCommand reads the command of a comment: its first line that
// starts with @mergegate (any case), as GitHub renders the comment, so
// that nothing shown as a quotation, as code or not at all is a command:
// quoted lines ("> ..."), fenced code blocks (``` or ~~~), indented code
// (four spaces or a tab) and HTML comments (<!-- ... -->) are left out.
// A comment carries at most one command: the lines after the first are
// not read (issue 30: every line its own command let one comment make
// the App post hundreds of replies).
func FirstCommand(body string) (Command, bool) {
	fence := ""     // the fence that opened the code block we are in
	inHTML := false // inside <!-- ... -->
	for len(body) > 0 {
		var line string
		line, body, _ = strings.Cut(body, "\n")
		line = strings.TrimSuffix(line, "\r")
		if inHTML {
			_, rest, closed := strings.Cut(line, "-->")
			if !closed {
				continue
			}
			inHTML, line = false, rest
		}
		line = stripHTMLComments(line, &inHTML)
		if fence != "" {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
				fence = ""
			}
			continue
		}
		if indented(line) {
			continue
		}
		t := strings.TrimSpace(line)
		if f := fenceOf(t); f != "" {
			fence = f
			continue
		}
		if strings.HasPrefix(t, ">") {
			continue
		}
		if c, ok := parseCommand(t); ok {
			return c, true
		}
	}
	return Command{}, false
}

// stripHTMLComments removes the <!-- ... --> of line; an opening without
// its close sets *open and drops the rest of the line.
func stripHTMLComments(line string, open *bool) string {
	for {
		before, after, found := strings.Cut(line, "<!--")
		if !found {
			return line
		}
		_, rest, closed := strings.Cut(after, "-->")
		if !closed {
			*open = true
			return before
		}
		line = before + " " + rest
	}
}

// indented: four columns of leading white space (a tab is four) make
// the line code in Markdown.
func indented(line string) bool {
	cols := 0
	for _, r := range line {
		switch r {
		case ' ':
			cols++
		case '\t':
			cols += 4
		default:
			return cols >= 4
		}
		if cols >= 4 {
			return true
		}
	}
	return false
}

// fenceOf is the fence (three or more backticks or tildes) that t opens,
// or "".
func fenceOf(t string) string {
	for _, c := range []string{"`", "~"} {
		n := len(t) - len(strings.TrimLeft(t, c))
		if n >= 3 {
			return strings.Repeat(c, n)
		}
	}
	return ""
}

// parseCommand reads one trimmed line; ok is false when it is not a
// command line at all.
func parseCommand(line string) (Command, bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 || !strings.EqualFold(fields[0], CommandPrefix) {
		return Command{}, false
	}
	name, arg := "", ""
	if len(fields) > 1 {
		name = strings.ToLower(fields[1])
	}
	if len(fields) > 2 {
		arg = strings.ToLower(fields[2])
	}
	switch {
	case (name == "queue" || name == "cancel" || name == "refresh") && len(fields) == 2:
		return Command{Name: name}, true
	case name == "priority" && len(fields) == 3 && (arg == "high" || arg == "normal" || arg == "low"):
		return Command{Name: name, Arg: arg}, true
	}
	return Command{Name: "invalid", Arg: clip(line, 200)}, true
}

// issueCommentPayload is an issue_comment delivery.
type issueCommentPayload struct {
	envelope
	Issue *struct {
		Number int `json:"number"`
		// PullRequest is set when the issue is a pull request.
		PullRequest *struct {
			URL string `json:"url"`
		} `json:"pull_request"`
	} `json:"issue"`
	Comment *struct {
		ID        int64     `json:"id"`
		Body      string    `json:"body"`
		CreatedAt time.Time `json:"created_at"`
		User      *struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		} `json:"user"`
	} `json:"comment"`
}

// translateIssueComment turns the commands of a new pull request comment
// into OpCommand events; the sync checks the author's permission and
// carries them out. Comments on issues, edits, deletions and comments by
// bots (mergegate's own replies among them) are not acted on.
func translateIssueComment(d leasedo.Delivery) (Translation, error) {
	var p issueCommentPayload
	if err := decode(d.Body, &p); err != nil {
		return Translation{}, err
	}
	switch {
	case p.Action != "created":
		return Translation{Ignored: fmt.Sprintf("issue_comment action %s is not acted on", quoted(p.Action))}, nil
	case p.Issue == nil || p.Comment == nil || p.Comment.User == nil || p.Issue.Number <= 0:
		return Translation{}, fmt.Errorf("%w: issue_comment delivery has no issue number, comment or author", ErrMalformed)
	case p.Issue.PullRequest == nil:
		return Translation{Ignored: "a comment on an issue, not a pull request"}, nil
	case p.Comment.User.Type == "Bot":
		return Translation{Ignored: "a comment by a bot"}, nil
	}
	if err := needRepo(d); err != nil {
		return Translation{}, err
	}
	c, ok := FirstCommand(p.Comment.Body)
	if !ok {
		return Translation{Ignored: "no @mergegate command in the comment"}, nil
	}
	var made int64
	if !p.Comment.CreatedAt.IsZero() {
		made = p.Comment.CreatedAt.UnixMilli()
	}
	return Translation{Events: []leasedo.Event{{EventType: d.Event, Tenant: d.Tenant, Repo: d.Repo, Action: p.Action,
		PRNumber: p.Issue.Number, Op: OpOf(d.Event, p.Action),
		Details: &leasedo.Details{Command: c.Name, Arg: c.Arg, By: p.Comment.User.Login, CommentID: p.Comment.ID, CommentedAt: made,
			Reason: "@" + p.Comment.User.Login + ": " + strings.TrimSpace(CommandPrefix+" "+c.Name+" "+c.Arg)}}}}, nil
}

// labelCheck is the event that has the sync check who added a trigger
// label (label_requires_write) before the pull request may stay queued.
func labelCheck(d leasedo.Delivery, pr int, sender string, opt rules.Options) (leasedo.Event, bool) {
	if !opt.LabelRequiresWrite || sender == "" {
		return leasedo.Event{}, false
	}
	return leasedo.Event{EventType: d.Event, Tenant: d.Tenant, Repo: d.Repo, Action: "labeled", PRNumber: pr, Op: leasedo.OpCommand,
		Details: &leasedo.Details{Command: "label", By: sender, Reason: "the trigger label was added by @" + sender}}, true
}
