package lockmgr

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Owner says on whose behalf a lock is held: one transaction (or one
// autocommit statement) of one client session of one proxy instance.
// Owners are compared by value; two Acquire calls with equal Owners belong to
// the same transaction.
type Owner struct {
	// Instance identifies the proxy process; unique among all instances
	// that share a lock backend (e.g. host:port plus a random suffix).
	Instance string
	// Session is the client connection id within the instance.
	Session uint64
	// Txn numbers the session's transactions (or autocommit statements).
	Txn uint64
	// Start is when the transaction began. It decides who is older in
	// wound-wait; keep it for the whole transaction. Wall clock: skew
	// between instances only shifts fairness, never safety.
	Start time.Time
}

// ID is the owner's stable text form "instance/session/txn".
func (o Owner) ID() string {
	return o.Instance + "/" + strconv.FormatUint(o.Session, 10) + "/" + strconv.FormatUint(o.Txn, 10)
}

// String is ID.
func (o Owner) String() string { return o.ID() }

// Priority is the owner's age as microseconds since the Unix epoch: the
// smaller, the older. Exact in a float64, so Redis scores hold it.
func (o Owner) Priority() int64 { return o.Start.UnixMicro() }

// Older reports whether o has precedence over p in wound-wait and in wait
// queues: an earlier Start, ties broken by ID. It is a strict total order
// over distinct owners, the same on every instance.
func (o Owner) Older(p Owner) bool {
	a, b := o.Priority(), p.Priority()
	if a != b {
		return a < b
	}
	return o.ID() < p.ID()
}

// Key is one lock: a row key built by the rules package, and the name of
// the rule it came from (used for metrics, logs and /debug/locks).
type Key struct {
	Name string
	Rule string
	// NoHandoff: every grant of the key must come from the lock service
	// with a new fence (its rule fences writes with it), so a backend never
	// hands it from one owner to the next inside the instance.
	NoHandoff bool
	// HandoffWindow, when positive and shorter than the backend's own
	// bound, ends the key's local hand-offs once that long has passed
	// since the lock service granted it (a row whose batches several
	// instances take turns on: lockproxy's rules[].combine.hold_window).
	HandoffWindow time.Duration
}

// NormalizeKeys returns keys sorted by Name with duplicates removed, the
// order in which every backend takes them. It fails with ErrInvalidKey on an
// empty list or an empty name.
func NormalizeKeys(keys []Key) ([]Key, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no keys", ErrInvalidKey)
	}
	out := slices.Clone(keys)
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.Name, b.Name) })
	j := 0
	for i := range out {
		switch {
		case i > 0 && out[i].Name == out[j].Name:
			out[j].NoHandoff = out[j].NoHandoff || out[i].NoHandoff // one rule that fences is enough
			out[j].HandoffWindow = shorterWindow(out[j].HandoffWindow, out[i].HandoffWindow)
		case i > 0:
			j++
			out[j] = out[i]
		}
	}
	out = out[:j+1]
	for _, k := range out {
		if k.Name == "" {
			return nil, fmt.Errorf("%w: empty key name (rule %q)", ErrInvalidKey, k.Rule)
		}
	}
	return out, nil
}

// shorterWindow is the tighter of two hand-off bounds, where 0 is none.
func shorterWindow(a, b time.Duration) time.Duration {
	if a <= 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// HandoffBound is the bound on k's local hand-offs given the backend's
// own (0: none): the tighter of the two.
func (k Key) HandoffBound(window time.Duration) time.Duration {
	return shorterWindow(window, k.HandoffWindow)
}
