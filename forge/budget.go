package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// GitHub's secondary limits on content-generating requests ("Rate limits
// for the REST API"): no more than 80 a minute and 500 an hour per
// installation, on every repository of it at once. The defaults leave
// headroom under both (Config.WritesPerMinute, Config.WritesPerHour).
const (
	DefaultWritesPerMinute = 60
	DefaultWritesPerHour   = 450
)

// WriteClass is what a content-generating request (POST, PATCH, PUT,
// DELETE, a GraphQL mutation) is for. When an installation's write budget
// runs low the classes are served in this order: a class may spend only
// its share of each window (classShare), so that what lands a pull request
// always finds room and a check run's title never takes it.
type WriteClass int

const (
	// ClassLand lands: a merge, a fast-forward of the base, an enqueue in
	// GitHub's merge queue.
	ClassLand WriteClass = iota
	// ClassUnblock lets something move: a branch update, a merge train's
	// build (its branches and merges).
	ClassUnblock
	// ClassTell tells a person: a bounce's comment, a command's reply, a
	// label taken off, a check run created or concluded.
	ClassTell
	// ClassCosmetic changes what a check run in progress says. The caller
	// keeps the newest and sends it when the budget allows; one not sent
	// before its entry left is never sent.
	ClassCosmetic
	numClasses
)

// WriteClasses lists the classes in the order they are served.
var WriteClasses = []WriteClass{ClassLand, ClassUnblock, ClassTell, ClassCosmetic}

func (c WriteClass) String() string {
	switch c {
	case ClassLand:
		return "land"
	case ClassUnblock:
		return "unblock"
	case ClassTell:
		return "tell"
	case ClassCosmetic:
		return "cosmetic"
	}
	return "unknown"
}

// classShare is the part of each window's budget a class may spend: past
// it, its writes wait while the classes above still find room.
var classShare = [numClasses]float64{ClassLand: 1, ClassUnblock: 0.9, ClassTell: 0.75, ClassCosmetic: 0.5}

// classOfOp is the class of each content-generating operation; one not
// listed tells a person.
var classOfOp = map[string]WriteClass{
	"pulls.merge":                        ClassLand,
	"git.update-ref":                     ClassLand, // the base's fast-forward (a build branch's reset is marked Unblock)
	"graphql.enqueue-pull-request":       ClassLand,
	"pulls.update-branch":                ClassUnblock,
	"graphql.update-pull-request-branch": ClassUnblock,
	"git.create-ref":                     ClassUnblock,
	"repos.merge":                        ClassUnblock,
}

type classKey struct{}

// WithWriteClass marks the writes made with ctx as of class c, over the
// class their operation has (classOfOp): a check run's update is a title
// (ClassCosmetic) or its conclusion (ClassTell) by what it says.
func WithWriteClass(ctx context.Context, c WriteClass) context.Context {
	return context.WithValue(ctx, classKey{}, c)
}

// writeClass is req's class, and whether req is content-generating at
// all. Reads (GET, HEAD, GraphQL queries) and the installation token's
// POST are not.
func writeClass(req *http.Request) (WriteClass, bool) {
	op := Operation(req)
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions:
		return 0, false
	case op == "apps.create-installation-access-token":
		return 0, false
	case strings.HasPrefix(op, "graphql.") && !graphQLMutations[op]:
		return 0, false
	}
	if c, ok := req.Context().Value(classKey{}).(WriteClass); ok {
		return c, true
	}
	if c, ok := classOfOp[op]; ok {
		return c, true
	}
	return ClassTell, true
}

// graphQLMutations are the GraphQL operations that change something; the
// others are queries, which cost no write.
var graphQLMutations = map[string]bool{"graphql.enqueue-pull-request": true, "graphql.update-pull-request-branch": true}

// WriteBudgetError is a write the installation's budget did not let out:
// it was not sent, and may be tried again at RetryAt. It is not GitHub's
// rate limit (reads go on).
type WriteBudgetError struct {
	Tenant  string
	Class   WriteClass
	RetryAt time.Time
}

func (e *WriteBudgetError) Error() string {
	return fmt.Sprintf("installation %s: %s write held back by the write budget until %s", e.Tenant, e.Class, e.RetryAt.UTC().Format(time.RFC3339))
}

// writeBudget counts one installation's content-generating requests in
// the last minute and the last hour (sliding windows on Config.Clock) and
// lets a write out only while its class's share of both is left. It is
// shared by every user of the Client; SetReplicas divides it among the
// replicas on one database, as it divides the requests in flight.
type writeBudget struct {
	tenant   string
	clock    func() time.Time
	log      zerolog.Logger
	minute   int // per replica; 0: no limit
	hour     int
	replicas int

	mu      sync.Mutex
	points  map[string][]pointsAt // operation -> its points in the last minute, oldest first
	sent    []time.Time           // sends in the last hour, oldest first
	byClass [numClasses]int64
	held    time.Time // when writes were first held back (zero: not held)
	heldN   int       // refusals since then
}

func newWriteBudget(tenant string, clock func() time.Time, perMinute, perHour int, log zerolog.Logger) *writeBudget {
	return &writeBudget{tenant: tenant, clock: clock, minute: max(perMinute, 0), hour: max(perHour, 0), log: log, points: map[string][]pointsAt{}}
}

// GitHub's secondary limit per REST endpoint: 900 points a minute, a read
// costing 1 and a write 5. Each installation's requests of one operation
// (its endpoint) stay under EndpointPointsPerMinute, shared by the
// replicas: a read waits for room (a cron pass over a thousand
// repositories of one installation reads their check runs faster than
// that at GitHub's best latency), a write is counted.
const EndpointPointsPerMinute = 800

type pointsAt struct {
	at     time.Time
	points int
}

// spend counts points of op, waiting (on the wall clock, re-reading the
// Client's clock) until its last minute has room for them, or ctx ends.
func (b *writeBudget) spend(ctx context.Context, op string, points int) error {
	for {
		b.mu.Lock()
		now := b.clock()
		ps := b.points[op]
		for len(ps) > 0 && !now.Before(ps[0].at.Add(time.Minute)) {
			ps = ps[1:]
		}
		used := 0
		for _, p := range ps {
			used += p.points
		}
		limit := max(EndpointPointsPerMinute/max(b.replicas, 1), 5)
		if used+points <= limit || len(ps) == 0 {
			b.points[op] = append(ps, pointsAt{at: now, points: points})
			b.mu.Unlock()
			return nil
		}
		b.points[op] = ps
		wait := ps[0].at.Add(time.Minute).Sub(now)
		b.mu.Unlock()
		t := time.NewTimer(min(max(wait, time.Millisecond), time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (b *writeBudget) setReplicas(n int) {
	b.mu.Lock()
	b.replicas = n
	b.mu.Unlock()
}

// limits are the window limits of this replica now (0: none).
func (b *writeBudget) limitsLocked() (minute, hour int) {
	n := max(b.replicas, 1)
	if b.minute > 0 {
		minute = max(1, b.minute/n)
	}
	if b.hour > 0 {
		hour = max(1, b.hour/n)
	}
	return minute, hour
}

// pruneLocked forgets the sends older than an hour.
func (b *writeBudget) pruneLocked(now time.Time) {
	i := 0
	for i < len(b.sent) && !now.Before(b.sent[i].Add(time.Hour)) {
		i++
	}
	b.sent = b.sent[i:]
}

// allowedAtLocked is when a write of class c may go out: now, or when
// enough of the windows' sends have aged out of them.
func (b *writeBudget) allowedAtLocked(c WriteClass, now time.Time) time.Time {
	b.pruneLocked(now)
	minute, hour := b.limitsLocked()
	at := now
	for _, w := range []struct {
		limit int
		span  time.Duration
	}{{minute, time.Minute}, {hour, time.Hour}} {
		if w.limit == 0 {
			continue
		}
		share := max(1, int(float64(w.limit)*classShare[c]))
		var in []time.Time // the window's sends, oldest first
		for i := len(b.sent) - 1; i >= 0 && now.Before(b.sent[i].Add(w.span)); i-- {
			in = b.sent[i:]
		}
		if over := len(in) - share + 1; over > 0 {
			if t := in[over-1].Add(w.span); t.After(at) {
				at = t
			}
		}
	}
	return at
}

// take lets one write of class c out now, or says when it may go.
func (b *writeBudget) take(c WriteClass) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	if at := b.allowedAtLocked(c, now); at.After(now) {
		if b.held.IsZero() {
			b.held = now
			minute, hour := b.limitsLocked()
			b.log.Warn().Str("tenant", b.tenant).Str("class", c.String()).Int("sent_last_hour", len(b.sent)).
				Int("per_minute", minute).Int("per_hour", hour).Time("next_at", at).Int64("wait_ms", at.Sub(now).Milliseconds()).
				Msg("GitHub writes held back to stay within the installation's write budget (GitHub allows 80 a minute, 500 an hour); landing goes first, check-run titles last")
		}
		b.heldN++
		return &WriteBudgetError{Tenant: b.tenant, Class: c, RetryAt: at}
	}
	b.sent = append(b.sent, now)
	b.byClass[c]++
	if !b.held.IsZero() && !b.allowedAtLocked(ClassCosmetic, now).After(now) {
		// Every class goes out again: said once, as the holding was.
		b.log.Info().Str("tenant", b.tenant).Int64("held_for_ms", now.Sub(b.held).Milliseconds()).Int("held_back", b.heldN).
			Msg("GitHub writes go out again")
		b.held, b.heldN = time.Time{}, 0
	}
	return nil
}

// WriteBudget is an installation's write budget now.
type WriteBudget struct {
	PerMinute, PerHour   int // this replica's limits (0: none)
	LastMinute, LastHour int // writes sent in each window
	// Held is when writes began to be held back (zero: they go out).
	Held time.Time
	// HeldBack counts the writes refused since Held.
	HeldBack int
	// Sent counts the writes sent since the Client started, by class.
	Sent map[string]int64
}

func (b *writeBudget) state() WriteBudget {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	b.pruneLocked(now)
	w := WriteBudget{LastHour: len(b.sent), Held: b.held, HeldBack: b.heldN, Sent: map[string]int64{}}
	w.PerMinute, w.PerHour = b.limitsLocked()
	for i := len(b.sent) - 1; i >= 0 && now.Before(b.sent[i].Add(time.Minute)); i-- {
		w.LastMinute++
	}
	for _, c := range WriteClasses {
		w.Sent[c.String()] = b.byClass[c]
	}
	return w
}

// WriteBudget returns tenant's write budget as this Client sees it.
func (c *Client) WriteBudget(tenant string) (WriteBudget, bool) {
	in, err := c.installation(tenant)
	if err != nil {
		return WriteBudget{}, false
	}
	return in.budget.state(), true
}

// IsWriteBudget reports whether err is a write the budget held back, and
// returns it.
func IsWriteBudget(err error) (*WriteBudgetError, bool) {
	var e *WriteBudgetError
	ok := errors.As(err, &e)
	return e, ok
}

// WritesSent counts the content-generating requests sent since the Client
// started, every installation together, by class.
func (c *Client) WritesSent() map[WriteClass]int64 {
	c.mu.Lock()
	insts := make([]*installation, 0, len(c.insts))
	for _, in := range c.insts {
		insts = append(insts, in)
	}
	c.mu.Unlock()
	out := map[WriteClass]int64{}
	for _, cl := range WriteClasses {
		out[cl] = 0
	}
	for _, in := range insts {
		in.budget.mu.Lock()
		for _, cl := range WriteClasses {
			out[cl] += in.budget.byClass[cl]
		}
		in.budget.mu.Unlock()
	}
	return out
}

// WriteBudgets returns the write budget of every installation this Client
// has spoken for, by tenant.
func (c *Client) WriteBudgets() map[string]WriteBudget {
	c.mu.Lock()
	insts := make(map[int64]*installation, len(c.insts))
	for id, in := range c.insts {
		insts[id] = in
	}
	c.mu.Unlock()
	out := make(map[string]WriteBudget, len(insts))
	for id, in := range insts {
		out[fmt.Sprint(id)] = in.budget.state()
	}
	return out
}
