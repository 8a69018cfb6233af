package pollwait

import (
	"context"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// Status is the outcome of one Store.Try.
type Status int

const (
	// Granted: the key is now held by the request's token.
	Granted Status = iota + 1
	// Busy: another token holds the key.
	Busy
	// Queued: the key is free, but an older waiter goes first (or the
	// service asked for a retry).
	Queued
)

// Request is one try for one key.
type Request struct {
	Key   string
	Tok   string        // unique per Acquire; the lock's holder token
	Owner lockmgr.Owner // for wound-wait: age and id
	// Ticketed: an earlier Try of this wait may have queued a ticket,
	// which a grant must drop.
	Ticketed bool
}

// Result is what a Store.Try found.
type Result struct {
	Status Status
	// Fence is the fencing token granted (Granted only).
	Fence uint64
	// Remaining is the holder's remaining lease when Busy, 0 if unknown.
	Remaining time.Duration
	// Holder names the holder's owner (Busy only), for logs.
	Holder string
}

// Held is one token and the keys it holds.
type Held struct {
	Tok  string
	Keys []string
	// Fences[i] was granted with Keys[i]; Owner is the holder. For Renew
	// only.
	Fences []uint64
	Owner  lockmgr.Owner
	// Valid: the lease is still valid on this process's clock, so a
	// Store may restore a key one of its servers lost (Renew only).
	Valid bool
}

// RenewState is the outcome of renewing one token's keys.
type RenewState int

const (
	// Unknown: no answer (service down); validity keeps running down.
	Unknown RenewState = iota
	// Renewed: every key is still held and its expiry pushed out by a ttl.
	Renewed
	// Lost: some key is no longer held by the token.
	Lost
)

// RenewResult is the renewal outcome of one Held.
type RenewResult struct {
	State RenewState
	// Wounded: an older transaction waits for one of the keys.
	Wounded bool
	// Restored: a key was written back where the service had lost it.
	Restored bool
}

// Store is one lock service. Every method is a bounded number of round
// trips, bounded by ctx; errors that mean "the service cannot be reached"
// wrap lockmgr.ErrUnavailable. Methods are called concurrently.
type Store interface {
	// Try grants r.Key to r.Tok if it is free (or its holder's lease
	// expired) and no older waiter is queued for it; otherwise it queues or
	// refreshes r.Tok's ticket (which expires on its own if not refreshed)
	// and wounds a younger holder of another owner (wound-wait).
	Try(ctx context.Context, r Request) (Result, error)
	// Queue queues or refreshes r.Tok's ticket for r.Key without trying
	// to take it: a waiter behind another of the same Engine keeps its
	// place among the waiters of every Engine.
	Queue(ctx context.Context, r Request) error
	// Release gives keys back if tok holds them (compare-and-release).
	// fences[i] was granted with keys[i] (a Store may use them to keep
	// its counters from falling behind). Idempotent.
	Release(ctx context.Context, tok string, keys []string, fences []uint64) error
	// Leave ends a wait that failed or was granted too late: it drops
	// r.Tok's ticket for r.Key and releases r.Key if r.Tok holds it.
	// Idempotent.
	Leave(ctx context.Context, r Request) error
	// Renew extends every key of every Held by one ttl, where still held.
	// The result has one entry per Held, in order.
	Renew(ctx context.Context, held []Held) ([]RenewResult, error)
	// Wounded reports whether any key of held is marked wounded.
	Wounded(ctx context.Context, held []Held) (bool, error)
}
