package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// healthcheckSettings: the public listener's address, read as serve reads
// it (flag, MERGEGATE_ADDR, the config file), so that a container's
// HEALTHCHECK needs no argument.
func healthcheckSettings() []setting {
	var out []setting
	for _, s := range serveSettings {
		if s.name == "addr" || s.name == "config" {
			out = append(out, s)
		}
	}
	return out
}

// healthcheckCmd GETs /healthz of the mergegate listening at --addr on this
// host: the distroless image has no curl or wget for a HEALTHCHECK.
func healthcheckCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	setUsage(fs, "healthcheck")
	v, err := parseSettings(fs, healthcheckSettings(), args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	url := "http://" + localAddr(v["addr"]) + "/healthz"
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err // Get "http://...": what went wrong
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		return errors.New("GET " + url + ": " + resp.Status + " " + text)
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, resp.Status)
	return nil
}

// localAddr is where a client on this host reaches a listener at addr: a
// missing or unspecified host (":8080", "0.0.0.0:8080", "[::]:8080") is
// 127.0.0.1.
func localAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
