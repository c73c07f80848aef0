package forge_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/internal/fakegithub"
	"github.com/mergegate/mergegate/internal/testkit"
	"github.com/mergegate/mergegate/leasedo"
)

const (
	tenant = "31337"
	repo   = "octo/widgets"
)

// newClock is the manual clock shared by the fake and the client.
func newClock() *leasedo.ManualClock {
	return leasedo.NewManualClock(time.Now().Truncate(time.Second))
}

type env struct {
	gh    *fakegithub.Server
	c     *forge.Client
	clock *leasedo.ManualClock
	ctx   context.Context
}

type envOpts struct {
	prefix       string
	timeout      time.Duration
	mergeTimeout time.Duration // Config.MergeTimeout (0: the default)
	// The conditional-request cache's bounds (0: the defaults).
	cacheEntries int
	cacheBytes   int64
	// perInstallation is Config.InstallationConcurrency (0: the default).
	perInstallation int
	log             io.Writer // Config.Logger's output (nil: none)
	key             []byte    // the client's App key (nil: the fake's)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	clk := newClock()
	gh := fakegithub.NewWithOptions(t, fakegithub.Options{PathPrefix: o.prefix, Clock: clk.Now})
	gh.AddRepo(tenant, repo, "main")
	key := o.key
	if key == nil {
		key = gh.PrivateKeyPEM()
	}
	var log zerolog.Logger
	if o.log != nil {
		log = zerolog.New(o.log)
	}
	c := testkit.Forge(t, gh, forge.Config{
		PrivateKey:   key,
		Logger:       log,
		Clock:        clk.Now,
		Timeout:      o.timeout,
		MergeTimeout: o.mergeTimeout,
		CacheEntries: o.cacheEntries,
		CacheBytes:   o.cacheBytes,

		InstallationConcurrency: o.perInstallation,
	})
	return &env{gh: gh, c: c, clock: clk, ctx: context.Background()}
}
