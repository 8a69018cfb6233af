package leasebook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// NewID is a random 16-hex-digit id for a Locker: in its tokens, entries
// and wound addresses, so that no two Lockers anywhere share one.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Acquire is the frame every backend's Locker.Acquire shares: it records
// the acquire in ledger's metrics (with the normalized keys), fails with
// lockmgr.ErrClosed when closed, normalizes keys and hands them to take.
func Acquire(ledger *lockmgr.Ledger, closed bool, keys []lockmgr.Key,
	take func([]lockmgr.Key) (*lockmgr.Lease, error)) (lease *lockmgr.Lease, err error) {
	start := time.Now()
	defer func() { ledger.Metrics().ObserveAcquire(keys, start, err) }()
	if closed {
		return nil, lockmgr.ErrClosed
	}
	if keys, err = lockmgr.NormalizeKeys(keys); err != nil {
		return nil, err
	}
	return take(keys)
}

// TakeAll takes keys one by one in order with take and returns their
// fences. On the first error it calls undo (which gives back what was
// taken) and returns that error.
func TakeAll(keys []lockmgr.Key, take func(lockmgr.Key) (uint64, error), undo func()) ([]uint64, error) {
	fences := make([]uint64, 0, len(keys))
	for _, k := range keys {
		f, err := take(k)
		if err != nil {
			undo()
			return nil, err
		}
		fences = append(fences, f)
	}
	return fences, nil
}

// ReleaseHeld releases every lease ledger lists as held, each on its own
// context from fresh, ignoring errors: what a Locker does when it closes.
func ReleaseHeld(ledger *lockmgr.Ledger, fresh func() (context.Context, context.CancelFunc)) {
	for _, lease := range ledger.Held() {
		ctx, cancel := fresh()
		_ = lease.Release(ctx)
		cancel()
	}
}

// Defaults of the options every backend has.
const (
	// DefaultTTL is the default lease (or session timeout).
	DefaultTTL = 30 * time.Second
	// DefaultOpTimeout is the default bound of one call to the service.
	DefaultOpTimeout = time.Second
)

// CallCtx bounds one call to the lock service made for ctx: by ctx's own
// deadline when it has one (an acquire's wait: a slow service is waited
// for as long as the caller waits, never cut short by a shorter fixed
// bound, which would turn slow into unavailable), else by opTimeout
// (background work: renewals, announcements).
func CallCtx(ctx context.Context, opTimeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, opTimeout)
}

// Defaults fills in the options every backend has: a ttl or opTimeout
// <= 0 becomes DefaultTTL or DefaultOpTimeout, and, when logger is not
// nil, a nil *logger becomes a no-op logger.
func Defaults(ttl, opTimeout *time.Duration, logger **zap.Logger) {
	if *ttl <= 0 {
		*ttl = DefaultTTL
	}
	if *opTimeout <= 0 {
		*opTimeout = DefaultOpTimeout
	}
	if logger != nil && *logger == nil {
		*logger = zap.NewNop()
	}
}

// Stopper stops a Locker once: by Close (release true: every lease the
// ledger lists as held is given back first, each on its own context from
// fresh) or by Abandon (release false: as if the process died, nothing is
// given back). Teardown is the backend's own part of stopping, run once
// after the releases. The zero Stopper is ready; it is safe for
// concurrent use.
type Stopper struct{ once sync.Once }

// Stop stops the Locker the first time it is called; later calls return at
// once.
func (s *Stopper) Stop(release bool, ledger *lockmgr.Ledger, fresh func() (context.Context, context.CancelFunc), teardown func(release bool)) {
	s.once.Do(func() {
		if release {
			ReleaseHeld(ledger, fresh)
		}
		teardown(release)
	})
}
