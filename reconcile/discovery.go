package reconcile

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/mergegate/mergegate/forge"
	"github.com/mergegate/mergegate/leasedo"
)

// discovery is what GitHub said about the App's installations this pass.
// A nil *discovery (no Forge) knows nothing.
type discovery struct {
	listed bool            // the installation listing succeeded
	insts  map[string]bool // tenant -> suspended
	mu     sync.Mutex
	repos  map[string]map[string]bool // tenant -> its repositories, when listed
	count  int
	// at is when another replica's discovery ran (zero: this pass's):
	// a repository tracked since is not judged by it.
	at time.Time
}

// suspended reports whether GitHub lists tenant's installation as suspended
// (the suspend delivery may have been lost).
func (d *discovery) suspended(tenant string) bool {
	return d != nil && d.insts[tenant]
}

// gone reports whether GitHub, asked this pass (or by the replica whose
// discovery this is, after t was tracked), no longer lists t's
// installation or repository.
func (d *discovery) gone(t leasedo.Tracked) bool {
	if d == nil || !d.listed || (!d.at.IsZero() && t.TrackedAt > d.at.UnixMilli()) {
		return false
	}
	k := t.Key
	if _, ok := d.insts[k.Tenant]; !ok {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	set, ok := d.repos[k.Tenant]
	return ok && !set[k.Repo]
}

// discover lists the App's installations once, then each non-suspended
// installation's repositories, and tracks them: tenants come from GitHub as
// well as from installation deliveries, so a lost database is rebuilt
// without any webhook. Failures are logged; the pass goes on with what is
// tracked. Both listings are conditional (304 when unchanged).
func (r *Reconciler) discover(ctx context.Context, stops *tenantStops) *discovery {
	d := &discovery{insts: map[string]bool{}, repos: map[string]map[string]bool{}}
	insts, err := r.forge.ListInstallations(ctx)
	if err != nil {
		r.log.Warn().Err(err).Msg("reconcile: listing the App's installations failed; using tracked repositories only")
		return d
	}
	d.listed = true
	var active []forge.Installation
	for _, in := range insts {
		d.insts[in.Tenant] = in.Suspended
		if in.Suspended {
			r.log.Debug().Str("tenant", in.Tenant).Msg("reconcile: installation suspended; paused")
			continue
		}
		active = append(active, in)
	}
	forEach(r, r.conc, active, func(in forge.Installation) {
		log := r.log.With().Str("tenant", in.Tenant).Logger()
		if err := r.rateFloor(in.Tenant); err != nil {
			stops.stop(r, in.Tenant, err.Error())
			return
		}
		names, err := r.forge.ListInstallationRepos(r.withRateFloor(ctx, in.Tenant), in.Tenant)
		if err != nil {
			if _, ok := forge.IsRateLimited(err); ok {
				stops.stop(r, in.Tenant, err.Error())
			}
			log.Warn().Err(err).Msg("reconcile: listing the installation's repositories failed")
			return
		}
		keys := make([]leasedo.Key, 0, len(names))
		set := make(map[string]bool, len(names))
		for _, n := range names {
			keys = append(keys, leasedo.Key{Tenant: in.Tenant, Repo: n})
			set[n] = true
		}
		if err := r.store.Track(ctx, keys...); err != nil {
			log.Error().Err(err).Msg("reconcile: tracking the installation's repositories failed")
			return
		}
		d.mu.Lock()
		d.repos[in.Tenant] = set
		d.count += len(keys)
		d.mu.Unlock()
	})
	return d
}

// discoverOnce is discover as a singleton job of the replicas on one
// database (every >= 0, runAll's claim): the replica that runs it this
// period records its findings (the installations' suspension, each
// installation's repositories), and the others read them instead of
// asking GitHub again. Unclaimed (every < 0) it is discover.
func (r *Reconciler) discoverOnce(ctx context.Context, stops *tenantStops, every time.Duration) (*discovery, string) {
	if every < 0 {
		d := r.discover(ctx, stops)
		if !d.listed {
			return d, ""
		}
		return d, DiscoveryRan
	}
	var d *discovery
	ran, err := r.store.RunJob(ctx, leasedo.JobDiscovery, r.by, every, func(ctx context.Context, l *leasedo.Lease) error {
		d = r.discover(ctx, stops)
		if !d.listed {
			return nil // nothing learnt: the others keep the last findings
		}
		b, err := json.Marshal(d.state())
		if err != nil {
			return err
		}
		return r.store.SetJobState(ctx, l, leasedo.JobDiscovery, string(b))
	})
	if err != nil {
		r.log.Warn().Err(err).Msg("reconcile: installation discovery as the cluster's job failed")
	}
	if ran {
		if d == nil || !d.listed {
			return d, ""
		}
		return d, DiscoveryRan
	}
	if err != nil {
		return nil, ""
	}
	last, ok, err := r.store.LastJobRun(ctx, leasedo.JobDiscovery)
	if err != nil || !ok || last.State == "" {
		if err != nil {
			r.log.Warn().Err(err).Msg("reconcile: reading another replica's installation discovery failed")
		}
		return nil, DiscoveryElsewhere
	}
	var st discoveryState
	if err := json.Unmarshal([]byte(last.State), &st); err != nil {
		r.log.Warn().Err(err).Msg("reconcile: another replica's installation discovery is unreadable")
		return nil, DiscoveryElsewhere
	}
	return st.discovery(last.RanAt), DiscoveryElsewhere
}

// discoveryState is a discovery as the jobs table keeps it for the other
// replicas.
type discoveryState struct {
	Insts map[string]bool     `json:"installations"` // tenant -> suspended
	Repos map[string][]string `json:"repos"`         // tenant -> its repositories, when listed
}

func (d *discovery) state() discoveryState {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := discoveryState{Insts: d.insts, Repos: map[string][]string{}}
	for tenant, set := range d.repos {
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		st.Repos[tenant] = names
	}
	return st
}

func (st discoveryState) discovery(at time.Time) *discovery {
	d := &discovery{listed: true, insts: st.Insts, repos: map[string]map[string]bool{}, at: at}
	if d.insts == nil {
		d.insts = map[string]bool{}
	}
	for tenant, names := range st.Repos {
		set := make(map[string]bool, len(names))
		for _, n := range names {
			set[n] = true
		}
		d.repos[tenant] = set
	}
	return d
}
