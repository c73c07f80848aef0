package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mergegate/mergegate/leasedo"
	"github.com/mergegate/mergegate/migrations"
)

// cluster is this replica's part among the replicas of mergegate on one
// database (issue 22; docs/operations.md, "Running several replicas"):
// it heartbeats the replica registry every leasedo.ReplicaBeat, shares
// each installation's request bound among the live replicas
// (forge.Client.SetReplicas: GitHub's secondary limit counts requests per
// installation, whichever replica sends them), and watches the schema
// for versions a newer mergegate applied (a rolling upgrade under way).
// Its tickers are on the wall clock, like the engine's housekeeping;
// what it records is on the store's clock.
type cluster struct {
	a    *App
	name string
	live atomic.Int64 // replicas alive at the last heartbeat (0 before)

	stopc, done chan struct{}
	stopOnce    sync.Once
	started     time.Time // wall clock
	beats       int
	schema      string // the newer schema versions last logged
}

// clusterSchemaEvery is how many heartbeats go between two looks at the
// schema's version (a minute).
const clusterSchemaEvery = 6

// startCluster registers this replica, logs a newer schema, and keeps
// both up to date until stop. It returns, and the engine sends its first
// request, once the replicas already alive have counted this one (each
// has heartbeated since it registered) and it has counted them: until
// then they share the whole bound among themselves, and a replica that
// started with them would take its share on top (issue 30: 5 in flight
// for a bound of 4 in the first seconds). It waits at most joinWait.
func (a *App) startCluster() *cluster {
	c := &cluster{a: a, name: a.cfg.Replica, stopc: make(chan struct{}), done: make(chan struct{}), started: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	c.beat(ctx)
	c.checkSchema(ctx)
	cancel()
	c.awaitCounted()
	go c.loop()
	return c
}

// joinWait bounds startCluster's wait for the others to count this
// replica: their next heartbeat, and then some. A replica not seen for
// ReplicaLive is dead and not waited for.
const joinWait = leasedo.ReplicaBeat + 2*time.Second

// joinBeat is the heartbeat's period in a replica's first ReplicaLive:
// replicas started together count each other within it.
const joinBeat = time.Second

// awaitCounted waits until no live replica is behind this one (see
// startCluster), then counts the replicas again.
func (c *cluster) awaitCounted() {
	deadline := time.Now().Add(joinWait)
	waited := false
	for {
		ctx, cancel := context.WithTimeout(context.Background(), leasedo.ReplicaBeat)
		behind, err := c.a.Store.ReplicasBehind(ctx, c.name)
		cancel()
		if err != nil {
			c.a.log.Warn().Err(err).Str("replica", c.name).Msg("could not tell whether the other replicas counted this one; starting anyway")
			break
		}
		if behind == 0 {
			break
		}
		if time.Now().After(deadline) {
			c.a.log.Warn().Str("replica", c.name).Int("replicas_behind", behind).
				Msg("other replicas did not heartbeat within 12 s of this one's start; starting anyway (their share of GitHub's request bound may be stale until they do)")
			break
		}
		if !waited {
			c.a.log.Info().Str("replica", c.name).Int("replicas_behind", behind).
				Msg("waiting for the replicas already running to count this one before its first GitHub request (at most their next heartbeat)")
		}
		waited = true
		time.Sleep(100 * time.Millisecond)
	}
	if waited {
		ctx, cancel := context.WithTimeout(context.Background(), leasedo.ReplicaBeat)
		c.beat(ctx)
		cancel()
	}
}

func (c *cluster) loop() {
	defer close(c.done)
	t := time.NewTimer(c.period())
	defer t.Stop()
	for {
		select {
		case <-c.stopc:
			return
		case <-t.C:
		}
		t.Reset(c.period())
		ctx, cancel := context.WithTimeout(context.Background(), leasedo.ReplicaBeat)
		c.beat(ctx)
		if c.beats++; c.beats%clusterSchemaEvery == 0 {
			c.checkSchema(ctx)
		}
		cancel()
	}
}

// period is the time to the next heartbeat: joinBeat in the replica's
// first ReplicaLive, then ReplicaBeat.
func (c *cluster) period() time.Duration {
	if time.Since(c.started) < leasedo.ReplicaLive {
		return joinBeat
	}
	return leasedo.ReplicaBeat
}

// beat records this replica alive, counts the live ones and gives the
// current GitHub client its share.
func (c *cluster) beat(ctx context.Context) {
	n, err := c.a.Store.Heartbeat(ctx, c.name)
	if err != nil {
		c.a.log.Warn().Err(err).Str("replica", c.name).Msg("replica heartbeat failed; the share of GitHub's request limit stays as it was")
		return
	}
	old := c.live.Swap(int64(n))
	fc, _, _ := c.a.current()
	if fc == nil {
		return
	}
	fc.SetReplicas(n)
	if old != int64(n) && (old != 0 || n > 1) {
		c.a.log.Info().Str("replica", c.name).Int("replicas", n).Int("per_installation", fc.InstallationLimit()).
			Msg("replicas alive on the database changed: each installation's requests in flight from this replica are bounded by its share")
	}
}

// stop stops the heartbeats and takes this replica out of the registry,
// so that the others' next heartbeat gives them its share. Once: a
// second Shutdown does nothing more.
func (c *cluster) stop(ctx context.Context) {
	if c == nil {
		return
	}
	c.stopOnce.Do(func() {
		close(c.stopc)
		<-c.done
		if err := c.a.Store.LeaveCluster(ctx, c.name); err != nil {
			c.a.log.Warn().Err(err).Str("replica", c.name).Msg("leaving the replica registry failed; the others count this replica for 30 s more")
		}
	})
}

// replicas is the live replicas at the last heartbeat (0: none yet).
func (c *cluster) replicas() int {
	if c == nil {
		return 0
	}
	return int(c.live.Load())
}

// checkSchema logs, once per change, the schema versions a newer
// mergegate applied: compatible ones (this replica runs on; upgrade it)
// or, applied while it ran, one it cannot run on (stop it).
func (c *cluster) checkSchema(ctx context.Context) {
	newer, err := c.a.Store.DB().NewerSchema(ctx)
	if err != nil {
		c.a.log.Warn().Err(err).Msg("reading the database's schema version failed")
		return
	}
	var names []string
	incompatible := ""
	for _, v := range newer {
		by := v.Binary
		if by == "" {
			by = "an unknown mergegate"
		}
		kind := "compatible"
		if !v.Compatible {
			kind = "not compatible"
			if incompatible == "" {
				incompatible = fmt.Sprintf("%s (applied by %s)", v.Name, by)
			}
		}
		names = append(names, fmt.Sprintf("%d %s (%s, applied by %s)", v.Version, v.Name, kind, by))
	}
	desc := strings.Join(names, "; ")
	if desc == c.schema {
		return
	}
	c.schema = desc
	if len(newer) == 0 {
		return
	}
	if incompatible != "" {
		c.a.log.Error().Strs("schema_versions", names).Int("binary_schema", migrations.LatestOf(c.dialect())).
			Msgf("a newer mergegate applied a schema change this binary cannot run on, %s: stop this replica and start that mergegate (or newer) in its place", incompatible)
		return
	}
	c.a.log.Warn().Strs("schema_versions", names).Int("binary_schema", migrations.LatestOf(c.dialect())).
		Msg("the database's schema is newer than this binary knows; the newer versions are compatible, so this replica keeps running: upgrade it to the mergegate that applied them")
}

func (c *cluster) dialect() migrations.Dialect {
	if c.a.Store.DB().Postgres() {
		return migrations.Postgres
	}
	return migrations.SQLite
}

// pruneOnce is housekeeping's Prune as the replicas' singleton job: one
// replica at a time, at most once a PruneEvery across them.
func (e *Engine) pruneOnce(ctx context.Context) {
	_, err := e.store.RunJob(ctx, leasedo.JobPrune, e.cfg.By, e.cfg.PruneEvery, func(ctx context.Context, _ *leasedo.Lease) error {
		e.Prune(ctx)
		return nil
	})
	if err != nil {
		e.log.Error().Err(err).Msg("prune deliveries: the replicas' job")
	}
}
