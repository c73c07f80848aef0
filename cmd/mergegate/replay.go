package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/replay"
	"github.com/mergegate/mergegate/rules"
	"github.com/mergegate/mergegate/webhook"
)

var replaySettings = []setting{
	{"url", "MERGEGATE_REPLAY_URL", "http://localhost:8080/webhook", "where to send the deliveries"},
	{"webhook-secret", "GITHUB_WEBHOOK_SECRET", "", "secret to sign with (the first of a comma-separated list)"},
	{"delay", "", "100ms", "pause between deliveries"},
	{"as-fast-as-possible", "", "false", "no pause between deliveries"},
	{"strict", "", "false", "stop at the first file that is not a recorded delivery, or (--offline) that mergegate refuses; without it such a file is named and skipped"},
	{"offline", "", "false", "run the deliveries in-process against a fake GitHub built from them and print the final state as JSON"},
	{"trigger-label", "MERGEGATE_TRIGGER_LABEL", "automerge", "--offline: label that puts a PR in the queue; empty turns the label trigger off"},
	{"auto-merge-trigger", "MERGEGATE_AUTO_MERGE_TRIGGER", "true", "--offline: GitHub auto-merge puts a PR in the queue"},
	{"merge-method", "MERGEGATE_MERGE_METHOD", "merge", "--offline: merge, squash or rebase"},
	{"config", "MERGEGATE_CONFIG", "", "YAML file (TOML if named *.toml) with the same keys as the flags"},
}

// replayBools are the replay flags that take no value.
var replayBools = []string{"offline", "strict", "as-fast-as-possible"}

func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "replay")
	v, err := parseSettings(fs, replaySettings, args)
	if err != nil {
		return err
	}
	flags := map[string]bool{}
	for _, b := range append(replayBools, "auto-merge-trigger") {
		on, err := strconv.ParseBool(v[b])
		if err != nil {
			return usageError{fmt.Errorf("--%s %q: want true or false", b, v[b])}
		}
		flags[b] = on
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("name at least one recorded delivery file or folder (see 'mergegate help replay')")}
	}
	// Every setting is checked before any file is read.
	var (
		offline  *replay.Options
		online   *sender
		strict   = flags["strict"]
		triggers = rules.Options{TriggerLabel: v["trigger-label"], AutoMergeTrigger: flags["auto-merge-trigger"]}
	)
	if flags["offline"] {
		if err := forge.CheckMergeMethod(v["merge-method"]); err != nil {
			return usageError{fmt.Errorf("--merge-method %q: %w", v["merge-method"], err)}
		}
		offline = &replay.Options{Triggers: &triggers, MergeMethod: v["merge-method"], Warn: stderr, Strict: strict}
	} else {
		secret, _, _ := strings.Cut(v["webhook-secret"], ",")
		secret = strings.TrimSpace(secret)
		if secret == "" {
			return usageError{errors.New("--webhook-secret (or GITHUB_WEBHOOK_SECRET) is required to sign the deliveries (or use --offline)")}
		}
		if u, err := url.Parse(v["url"]); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageError{fmt.Errorf("--url %q: want mergegate's webhook URL, such as http://localhost:8080/webhook", v["url"])}
		}
		delay, err := time.ParseDuration(v["delay"])
		if err != nil || delay < 0 {
			return usageError{fmt.Errorf("--delay %q: want a duration like 100ms or 1s", v["delay"])}
		}
		if flags["as-fast-as-possible"] {
			delay = 0
		}
		online = &sender{url: v["url"], secret: secret, delay: delay, client: &http.Client{Timeout: 30 * time.Second}}
	}

	in, skipped, err := replay.Load(fs.Args(), strict)
	if err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "skipped %v\n", s)
	}
	if len(in.Deliveries) == 0 {
		fmt.Fprintln(stderr, "no recorded deliveries to replay")
	}
	if offline != nil {
		offline.Scenario, offline.Files = in.Scenario, in.Files
		out, err := replay.Offline(context.Background(), in.Deliveries, *offline)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	}
	return online.replay(in, len(skipped), stdout)
}

// sender sends recorded deliveries to a running mergegate.
type sender struct {
	url, secret string
	delay       time.Duration
	client      *http.Client
}

// replay sends in's deliveries in order and prints each answer's status.
// A delivery answered other than 2xx is refused: the run goes on, and ends
// with an error. A delivery that gets no answer stops the run.
func (s *sender) replay(in replay.Input, skipped int, stdout io.Writer) error {
	refused := 0
	for i, rec := range in.Deliveries {
		if i > 0 && s.delay > 0 {
			time.Sleep(s.delay)
		}
		status, msg, err := send(s.client, s.url, s.secret, rec)
		if err != nil {
			fmt.Fprintf(stdout, "%d sent, %d refused, %d skipped\n", i, refused, skipped)
			return fmt.Errorf("%s (delivery %s): %w", in.Files[i], rec.Delivery, err)
		}
		line := fmt.Sprintf("%d %s %s %s", status, rec.Event, rec.Delivery, in.Files[i])
		if status < 200 || status > 299 {
			refused++
			if msg != "" {
				line += ": " + msg
			}
		}
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "%d sent, %d refused, %d skipped\n", len(in.Deliveries), refused, skipped)
	if refused > 0 {
		return fmt.Errorf("%d of %d deliveries were refused", refused, len(in.Deliveries))
	}
	return nil
}

// send posts one recorded delivery as GitHub would, signed with secret. It
// returns the status and, for a refusal, mergegate's error message.
func send(client *http.Client, url, secret string, rec app.Recorded) (int, string, error) {
	body := compact(rec.Payload)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	for k, v := range rec.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "mergegate-replay")
	webhook.SignDelivery(req.Header, secret, rec.Event, rec.Delivery, body)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var answer struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(b, &answer)
	return resp.StatusCode, answer.Error, nil
}

// compact is the payload as GitHub sends it: compact JSON.
func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
