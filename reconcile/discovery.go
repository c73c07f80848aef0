package reconcile

import (
	"context"
	"sync"

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
}

// suspended reports whether GitHub lists tenant's installation as suspended
// (the suspend delivery may have been lost).
func (d *discovery) suspended(tenant string) bool {
	return d != nil && d.insts[tenant]
}

// gone reports whether GitHub, asked this pass, no longer lists k's
// installation or repository.
func (d *discovery) gone(k leasedo.Key) bool {
	if d == nil || !d.listed {
		return false
	}
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
