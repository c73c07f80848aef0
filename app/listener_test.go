package app

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestListenersHaveTimeouts: the admin listener has read, write and idle
// timeouts (it had a header timeout only), the public one a write timeout
// that leaves the 60 s body deadline room.
func TestListenersHaveTimeouts(t *testing.T) {
	h := newHarness(t, withoutGitHub)
	adm, pub := h.app.admin, h.app.public
	if adm.ReadHeaderTimeout <= 0 || adm.ReadTimeout <= 0 || adm.WriteTimeout <= 0 || adm.IdleTimeout <= 0 {
		t.Errorf("admin listener timeouts: header %v read %v write %v idle %v; want all set",
			adm.ReadHeaderTimeout, adm.ReadTimeout, adm.WriteTimeout, adm.IdleTimeout)
	}
	if pub.ReadTimeout != 60*time.Second {
		t.Errorf("public ReadTimeout (the body deadline) %v, want 60s", pub.ReadTimeout)
	}
	// WriteTimeout runs from the end of the headers: the body's 60 s and
	// the answer must fit in it.
	if pub.WriteTimeout < pub.ReadTimeout+10*time.Second || pub.IdleTimeout <= 0 {
		t.Errorf("public WriteTimeout %v, IdleTimeout %v; want WriteTimeout > ReadTimeout + 10s", pub.WriteTimeout, pub.IdleTimeout)
	}
}

// TestAdminDropsABodyThatNeverEnds: a client that sends its headers and
// then part of a body is cut off at the admin listener's read timeout,
// instead of holding a connection and its goroutine for ever.
func TestAdminDropsABodyThatNeverEnds(t *testing.T) {
	h := newHarness(t, withoutGitHub, func(c *Config) {
		c.adminTimeouts = listenerTimeouts{readHeader: time.Second, read: 200 * time.Millisecond, write: time.Second, idle: time.Second}
	})
	addr := strings.TrimPrefix(h.admin, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /event HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"eventType\":", addr)
	// Not a sleep: the server's own timer ends the read. The deadline only
	// keeps a regression from hanging the test.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	out, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the admin listener still held the connection after 10 s (read %q)", out)
	}
	if q := h.queue(); len(q) != 0 {
		t.Fatalf("queue %+v", q)
	}
}
