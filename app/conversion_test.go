package app

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

// The one-time VACUUM on upgrade logs its progress every 5 s of the
// clock: the bytes written of the file's, and an estimate of the time left.
func TestConversionLogsProgress(t *testing.T) {
	clk := leasedo.NewManualClock(time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	var buf testkit.SyncBuffer
	report := logConversion(zerolog.New(&buf), "/data/mergegate.db", clk.Now)
	report(leasedo.Conversion{Bytes: 100e6})
	clk.Advance(time.Second)
	report(leasedo.Conversion{Bytes: 100e6, Running: true, Written: 10e6}) // within 5 s: no line
	clk.Advance(4 * time.Second)
	report(leasedo.Conversion{Bytes: 100e6, Running: true, Written: 50e6})
	clk.Advance(time.Second)
	report(leasedo.Conversion{Done: true, Bytes: 100e6, BytesAfter: 60e6, Took: 6 * time.Second})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("log:\n%s", buf.String())
	}
	want := `{"level":"warn","db":"/data/mergegate.db","message":"rewriting the database (VACUUM): 50% (50.0 MB of 100.0 MB), about 5s left"}`
	if lines[1] != want {
		t.Fatalf("progress line\n%s\nwant\n%s", lines[1], want)
	}
	if !strings.Contains(lines[2], "database rewritten") {
		t.Fatalf("last line: %s", lines[2])
	}
}
