package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// Off a terminal: one line every 5 s of the injected clock, with the
// figures and an estimate from the rate so far, then the end.
func TestLinesOffATerminal(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	off := false
	m := New(&out, "migrate-store", 1000, Rows, Options{TTY: &off, Now: c.now})
	m.Add(100)
	if out.Len() != 0 {
		t.Fatalf("a line before 5 s: %q", out.String())
	}
	c.advance(5 * time.Second)
	m.Add(150) // 250 of 1000 in 5 s: 15 s left
	c.advance(time.Second)
	m.Add(10) // no line: 1 s after the last
	c.advance(4 * time.Second)
	m.Set(500) // 500 in 10 s: 10 s left
	c.advance(2 * time.Second)
	m.Done()
	want := "migrate-store: 25% (250 of 1000 rows), about 15s left\n" +
		"migrate-store: 50% (500 of 1000 rows), about 10s left\n" +
		"migrate-store: 500 rows done in 12s\n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
	m.Done() // once
	if out.String() != want {
		t.Fatalf("a second Done wrote: %q", out.String())
	}
}

// On a terminal: a bar redrawn in place (carriage return, erase the
// line), bytes in MB, a newline at the end.
func TestBarOnATerminal(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}
	var out bytes.Buffer
	on := true
	m := New(&out, "backup", 40e6, Bytes, Options{TTY: &on, Now: c.now})
	c.advance(time.Second)
	m.Set(10e6)
	c.advance(100 * time.Millisecond)
	m.Set(11e6) // within the redraw interval: not drawn
	c.advance(time.Second)
	m.Set(20e6)
	c.advance(time.Second)
	m.Done()
	frames := strings.Split(out.String(), "\r\033[K")
	want := []string{"",
		"[==========>                             ] 25% (10.0 MB of 40.0 MB), about 3s left",
		"[====================>                   ] 50% (20.0 MB of 40.0 MB), about 2s left",
		"backup: 20.0 MB done in 3.1s\n"}
	if len(frames) != len(want) {
		t.Fatalf("frames %q", frames)
	}
	for i := range want {
		if frames[i] != want[i] {
			t.Errorf("frame %d = %q, want %q", i, frames[i], want[i])
		}
	}
}

// A total not known: figures without a percentage or estimate.
func TestUnknownTotal(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var out bytes.Buffer
	off := false
	m := New(&out, "export", 0, Rows, Options{TTY: &off, Now: c.now})
	c.advance(6 * time.Second)
	m.Add(7)
	if got := out.String(); got != "export: 7 rows\n" {
		t.Fatalf("got %q", got)
	}
	if IsTerminal(&out) {
		t.Fatal("a buffer is no terminal")
	}
}
