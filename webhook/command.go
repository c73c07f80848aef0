package webhook

import (
	"fmt"
	"strings"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/rules"
)

// CommandPrefix starts a command line in a pull request comment.
const CommandPrefix = "@mergegate"

// Command is one "@mergegate <name> [arg]" line of a comment. Name is
// queue, cancel, refresh or priority (arg high, normal or low); a line
// mergegate does not understand has Name "invalid" and the line as Arg,
// so that its author gets a reply saying what there is.
type Command struct {
	Name, Arg string
}

// Commands reads the commands of a comment: every line that starts with
// @mergegate (any case), quoted lines ("> ...") left out.
func Commands(body string) []Command {
	var out []Command
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimSpace(line)
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.EqualFold(fields[0], CommandPrefix) {
			continue
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
			out = append(out, Command{Name: name})
		case name == "priority" && len(fields) == 3 && (arg == "high" || arg == "normal" || arg == "low"):
			out = append(out, Command{Name: name, Arg: arg})
		default:
			out = append(out, Command{Name: "invalid", Arg: clip(line, 200)})
		}
	}
	return out
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
		ID   int64  `json:"id"`
		Body string `json:"body"`
		User *struct {
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
	cmds := Commands(p.Comment.Body)
	if len(cmds) == 0 {
		return Translation{Ignored: "no @mergegate command in the comment"}, nil
	}
	var t Translation
	for _, c := range cmds {
		t.Events = append(t.Events, leasedo.Event{EventType: d.Event, Tenant: d.Tenant, Repo: d.Repo, Action: p.Action,
			PRNumber: p.Issue.Number, Op: OpOf(d.Event, p.Action),
			Details: &leasedo.Details{Command: c.Name, Arg: c.Arg, By: p.Comment.User.Login, CommentID: p.Comment.ID,
				Reason: "@" + p.Comment.User.Login + ": " + strings.TrimSpace(CommandPrefix+" "+c.Name+" "+c.Arg)}})
	}
	return t, nil
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
