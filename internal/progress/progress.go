// Package progress shows how far a long operation is (backup,
// migrate-store, export, the one-time VACUUM on upgrade): on a terminal, a
// bar redrawn in place; otherwise a line every few seconds. Each says what
// is done of the total, in rows or bytes, and an estimate of the time left
// from the rate so far.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Every is how often a Meter writes a line when its writer is no terminal.
const Every = 5 * time.Second

// redraw is how often a terminal's bar is redrawn at most.
const redraw = 200 * time.Millisecond

// Unit says what is counted.
type Unit string

const (
	Rows  Unit = "rows"
	Bytes Unit = "bytes"
)

// Options tune a Meter; the zero value is the wall clock, and a bar when
// the writer is a terminal (IsTerminal).
type Options struct {
	// TTY draws a bar; nil: IsTerminal(w).
	TTY *bool
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Every is the interval of lines off a terminal; 0: Every.
	Every time.Duration
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Meter counts one operation's progress. Its methods may be called from
// several goroutines.
type Meter struct {
	mu     sync.Mutex
	w      io.Writer
	what   string
	unit   Unit
	total  int64
	done   int64
	tty    bool
	now    func() time.Time
	every  time.Duration
	start  time.Time
	last   time.Time // of the last line or bar
	closed bool
}

// New starts a Meter of what (e.g. "backup") over total units (0: not
// known; no percentage nor estimate).
func New(w io.Writer, what string, total int64, unit Unit, o Options) *Meter {
	m := &Meter{w: w, what: what, unit: unit, total: total, now: o.Now, every: o.Every}
	if m.now == nil {
		m.now = time.Now
	}
	if m.every <= 0 {
		m.every = Every
	}
	if o.TTY != nil {
		m.tty = *o.TTY
	} else {
		m.tty = IsTerminal(w)
	}
	m.start = m.now()
	m.last = m.start
	return m
}

// Add counts n more units done.
func (m *Meter) Add(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done += n
	m.tick()
}

// Set says done units are done (a sampled figure: a file's size).
func (m *Meter) Set(done int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done = done
	m.tick()
}

// Total changes the total (0: not known).
func (m *Meter) Total(total int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total = total
}

// Done ends the meter: a last line with what was done and how long it
// took (on a terminal, the bar at its end).
func (m *Meter) Done() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	took := m.now().Sub(m.start)
	line := fmt.Sprintf("%s: %s done in %s", m.what, amount(m.done, m.unit), took.Round(time.Millisecond))
	if m.tty {
		fmt.Fprintf(m.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintln(m.w, line)
}

func (m *Meter) tick() {
	if m.closed {
		return
	}
	now := m.now()
	gap := m.every
	if m.tty {
		gap = redraw
	}
	if now.Sub(m.last) < gap {
		return
	}
	m.last = now
	if m.tty {
		fmt.Fprintf(m.w, "\r\033[K%s", m.Bar(40))
		return
	}
	fmt.Fprintln(m.w, m.Line())
}

// Line is the meter as a log line says it: "backup: 45% (1.2 MB of 2.7 MB),
// about 12s left".
func (m *Meter) Line() string {
	var b strings.Builder
	b.WriteString(m.what + ": ")
	switch {
	case m.total > 0 && m.unit == Bytes:
		fmt.Fprintf(&b, "%d%% (%s of %s)", m.percent(), amount(m.done, m.unit), amount(m.total, m.unit))
	case m.total > 0:
		fmt.Fprintf(&b, "%d%% (%d of %s)", m.percent(), m.done, amount(m.total, m.unit))
	default:
		b.WriteString(amount(m.done, m.unit))
	}
	if left, ok := m.Left(); ok {
		b.WriteString(", about " + short(left) + " left")
	}
	return b.String()
}

// Bar is the meter as a terminal shows it: a bar of width cells, then
// the line's figures.
func (m *Meter) Bar(width int) string {
	if m.total <= 0 {
		return m.Line()
	}
	full := int(int64(width) * min(m.done, m.total) / m.total)
	bar := strings.Repeat("=", full)
	if full < width {
		bar += ">" + strings.Repeat(" ", width-full-1)
	}
	return fmt.Sprintf("[%s] %s", bar, strings.TrimPrefix(m.Line(), m.what+": "))
}

// Left estimates the time left from the rate so far; false while nothing
// is done yet or the total is not known.
func (m *Meter) Left() (time.Duration, bool) {
	el := m.now().Sub(m.start)
	if m.total <= 0 || m.done <= 0 || el <= 0 {
		return 0, false
	}
	rest := max(m.total-m.done, 0)
	return time.Duration(float64(el) * float64(rest) / float64(m.done)), true
}

func (m *Meter) percent() int64 {
	return min(100*m.done/m.total, 100)
}

// amount says n units: bytes in kB, MB or GB, rows as they are.
func amount(n int64, u Unit) string {
	if u != Bytes {
		return fmt.Sprintf("%d %s", n, u)
	}
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d bytes", n)
}

func short(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%ds", int((d+time.Second/2)/time.Second))
	}
	return d.Round(time.Second).String()
}
