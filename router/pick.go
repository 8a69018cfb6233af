package router

import "time"

// Pick returns the address of a healthy replica within MaxLag for one read,
// the one with the fewest outstanding queries (see Acquire), ties broken
// round-robin. ok is false when there is none (no replicas configured, or
// none healthy); the caller then reads from the primary. Pick does not
// count the read as outstanding: use PickAndTrack for that.
func (r *Router) Pick() (addr string, ok bool) {
	b := r.pick("")
	if b == nil {
		return "", false
	}
	return b.addr, true
}

// PickAndTrack is Pick plus Acquire in one step, so concurrent picks see
// each other: the returned release must be called when the read is done
// (it is idempotent). When ok is false, release is a no-op.
func (r *Router) PickAndTrack() (addr string, release func(), ok bool) {
	return r.PickFor("")
}

// PickFor is PickAndTrack restricted to replicas whose GTID position at
// their last check had already reached want (a GTID or a position, e.g.
// the session's last write on the primary), for read-your-writes without
// waiting on the replica. An empty want means any healthy replica; a want
// that does not parse picks none.
func (r *Router) PickFor(want string) (addr string, release func(), ok bool) {
	b := r.pick(want)
	if b == nil {
		return "", func() {}, false
	}
	return b.addr, b.track(), true
}

// pick chooses a replica; with want non-empty, only among those whose
// recorded position has reached it. A chosen backend is tracked (its
// outstanding count raised) by PickFor after pick returns; the small window
// only loosens balance, never correctness.
func (r *Router) pick(want string) *backend {
	var wantPos GTIDPos
	if want != "" {
		p, err := ParseGTIDPos(want)
		if err != nil {
			return nil
		}
		wantPos = p
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := len(r.replicas)
	if n == 0 {
		return nil
	}
	start := int(r.rr.Add(1) % uint64(n))
	var best *backend
	var bestLoad int64
	for i := range n {
		b := r.replicas[(start+i)%n]
		if !b.usable(r.cfg.MaxLag) || (wantPos != nil && !b.reached(wantPos)) {
			continue
		}
		if load := b.outstanding.Load(); best == nil || load < bestLoad {
			best, bestLoad = b, load
		}
	}
	return best
}

// reached reports whether b's recorded GTID position includes want.
func (b *backend) reached(want GTIDPos) bool {
	pos, err := ParseGTIDPos(b.snapshot().gtid)
	return err == nil && pos.Reached(want)
}

// Acquire counts one query as outstanding on the backend at addr (a
// replica or the primary) and returns the function that ends it, which is
// idempotent. An unknown addr gives a no-op. Pick balances on these counts.
func (r *Router) Acquire(addr string) (done func()) {
	if b := r.find(addr); b != nil {
		return b.track()
	}
	return func() {}
}

// MarkDown takes the backend at addr out of service at once, e.g. after a
// session's connection to it broke: Pick skips a replica, PrimaryHealthy
// is false for the primary, until a check that starts after this call
// succeeds. A check is started at once. Unknown addresses are ignored.
func (r *Router) MarkDown(addr string, err error) {
	b := r.find(addr)
	if b == nil {
		return
	}
	prev, cur := b.markDown(err, time.Now(), r.metrics)
	r.logChange(b, prev, cur)
	b.poke()
}

// find returns the backend at addr, replicas first.
func (r *Router) find(addr string) *backend {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, b := range r.replicas {
		if b.addr == addr {
			return b
		}
	}
	if r.primary != nil && r.primary.addr == addr {
		return r.primary
	}
	return nil
}
