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
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mergegate/mergegate/app"
	"github.com/mergegate/mergegate/webhook"
)

var replaySettings = []setting{
	{"url", "MERGEGATE_REPLAY_URL", "http://localhost:8080/webhook", "where to send the deliveries"},
	{"webhook-secret", "GITHUB_WEBHOOK_SECRET", "", "secret to sign with (the first of a comma-separated list)"},
	{"delay", "", "100ms", "pause between deliveries"},
	{"as-fast-as-possible", "", "false", "no pause between deliveries"},
	{"strict", "", "false", "stop at the first file that is not a recorded delivery (default: name it and skip it)"},
	{"offline", "", "false", "run the deliveries in-process against a fake GitHub and print the final state as JSON"},
	{"config", "MERGEGATE_CONFIG", "", "YAML file with the same keys as the flags"},
}

// loadRecorded reads recorded deliveries from files and folders (a
// folder's .json files in name order, which is arrival order). A file that
// is not a recorded delivery is named in the returned problems; with strict
// the first one is an error.
func loadRecorded(paths []string, strict bool) ([]app.Recorded, []string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return nil, nil, err
		}
		var names []string
		for _, e := range entries {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") && !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, n := range names {
			files = append(files, filepath.Join(p, n))
		}
	}
	var out []app.Recorded
	var problems []string
	for _, f := range files {
		rec, err := readRecorded(f)
		if err != nil {
			if strict {
				return nil, nil, err
			}
			problems = append(problems, err.Error())
			continue
		}
		out = append(out, rec)
	}
	return out, problems, nil
}

func readRecorded(path string) (app.Recorded, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return app.Recorded{}, err
	}
	var rec app.Recorded
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: not a recorded delivery: %v", path, err)
	}
	switch {
	case rec.Event == "":
		return rec, fmt.Errorf("%s: not a recorded delivery: no \"event\"", path)
	case rec.Delivery == "":
		return rec, fmt.Errorf("%s: not a recorded delivery: no \"delivery\"", path)
	case len(rec.Payload) == 0 || !json.Valid(rec.Payload) || rec.Payload[0] != '{':
		return rec, fmt.Errorf("%s: not a recorded delivery: \"payload\" is not a JSON object", path)
	}
	return rec, nil
}

func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	v, err := parseSettings(fs, replaySettings, args)
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{errors.New("name at least one recorded delivery file or folder")}
	}
	strict := v["strict"] == "true"
	recs, problems, err := loadRecorded(fs.Args(), strict)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "skipped %s\n", p)
	}
	if v["offline"] == "true" {
		out, err := app.ReplayOffline(context.Background(), recs, app.ReplayOptions{})
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	}
	secret, _, _ := strings.Cut(v["webhook-secret"], ",")
	if secret == "" {
		return usageError{errors.New("--webhook-secret (or GITHUB_WEBHOOK_SECRET) is required to sign the deliveries")}
	}
	delay, err := time.ParseDuration(v["delay"])
	if err != nil {
		return usageError{fmt.Errorf("--delay %q: want a duration", v["delay"])}
	}
	if v["as-fast-as-possible"] == "true" {
		delay = 0
	}
	client := &http.Client{Timeout: 30 * time.Second}
	refused := 0
	for i, rec := range recs {
		if i > 0 && delay > 0 {
			time.Sleep(delay)
		}
		status, err := send(client, v["url"], secret, rec)
		if err != nil {
			return fmt.Errorf("delivery %s: %w", rec.Delivery, err)
		}
		ok := status >= 200 && status < 300
		if !ok {
			refused++
		}
		fmt.Fprintf(stdout, "%d %s %s\n", status, rec.Event, rec.Delivery)
	}
	fmt.Fprintf(stdout, "%d sent, %d refused, %d skipped\n", len(recs), refused, len(problems))
	if refused > 0 {
		return fmt.Errorf("%d of %d deliveries were refused", refused, len(recs))
	}
	return nil
}

// send posts one recorded delivery as GitHub would, signed with secret.
func send(client *http.Client, url, secret string, rec app.Recorded) (int, error) {
	body := compact(rec.Payload)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range rec.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", rec.Event)
	req.Header.Set("X-GitHub-Delivery", rec.Delivery)
	req.Header.Set("User-Agent", "mergegate-replay")
	req.Header.Del("X-Hub-Signature")
	req.Header.Set("X-Hub-Signature-256", webhook.Sign(secret, body))
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck
	resp.Body.Close()
	return resp.StatusCode, nil
}

func compact(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return raw
	}
	return buf.Bytes()
}
