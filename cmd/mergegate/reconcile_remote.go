package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mergegate/mergegate/leasedo"
)

// `mergegate reconcile` beside a running `serve`: a pass run on the
// database directly would repair the queue without the server knowing, so
// the server is asked first (the admin API's POST /reconcile), and the
// database is used only when no server answers at --admin-addr.
const (
	// reconcileDialTimeout: a server on the same host answers a connect at
	// once; beyond this nobody listens there.
	reconcileDialTimeout = 2 * time.Second
	// reconcileAnswerTimeout bounds the server's pass (its resync reads
	// GitHub), a little beyond the cron's own deadline of 4 minutes.
	reconcileAnswerTimeout = 5 * time.Minute
)

// errNoServer says nothing listens at the admin address.
var errNoServer = errors.New("no server answers")

// adminURL is the base URL of the admin API at a listen address: an
// unspecified host (":8081", "0.0.0.0:8081") is reached on loopback. ok is
// false when no server can listen there (port 0, a malformed address).
func adminURL(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		return "", false
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), true
}

// reconcileViaServer asks the server at --admin-addr for k's pass and
// prints its answer as the local pass would. It returns errNoServer when
// nothing answers there; any answer, an error included, is the server's.
func reconcileViaServer(ctx context.Context, v values, k leasedo.Key, stdout, stderr io.Writer) error {
	base, ok := adminURL(v["admin-addr"])
	if !ok {
		return errNoServer
	}
	body, _ := json.Marshal(k)
	ctx, cancel := context.WithTimeout(ctx, reconcileAnswerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/reconcile", bytes.NewReader(body))
	if err != nil {
		return errNoServer
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := v["admin-token"]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	client := &http.Client{Transport: &http.Transport{
		Proxy:             nil, // the admin API is local: never through a proxy
		DialContext:       (&net.Dialer{Timeout: reconcileDialTimeout}).DialContext,
		DisableKeepAlives: true,
	}}
	resp, err := client.Do(req)
	if err != nil {
		// Only a connection that could not be made means no server: once
		// connected, the request may have started a pass.
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" && ctx.Err() == nil {
			return errNoServer
		}
		return fmt.Errorf("the server at %s did not answer: %w", base, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("the server at %s: reading its answer: %w", base, err)
	}
	fmt.Fprintf(stderr, "mergegate reconcile: the server at %s ran the pass (POST /reconcile)\n", base)
	var ans struct {
		Error  string `json:"error"`
		HeldBy string `json:"held_by"`
	}
	json.Unmarshal(raw, &ans) //nolint:errcheck // a non-JSON answer is reported by status below
	switch resp.StatusCode {
	case http.StatusOK:
		_, err := stdout.Write(withNewline(raw))
		return err
	case http.StatusConflict:
		return fmt.Errorf("%s is locked (held by %s); the next pass reconciles it", k, ans.HeldBy)
	case http.StatusUnauthorized:
		return fmt.Errorf("the server at %s refused the admin token: set --admin-token (or MERGEGATE_ADMIN_TOKEN) to the server's", base)
	case http.StatusBadGateway:
		// The pass failed part way; the answer lists what was fixed.
		stdout.Write(withNewline(raw)) //nolint:errcheck
		return fmt.Errorf("the server's pass failed: %s", ans.Error)
	}
	msg := ans.Error
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
	}
	return fmt.Errorf("the server at %s answered %d to POST /reconcile (is --admin-addr a mergegate admin listener?): %s", base, resp.StatusCode, msg)
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(b, '\n')
	}
	return b
}
