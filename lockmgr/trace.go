package lockmgr

import (
	"context"
	"slices"
	"sync"
)

// WaitTrace collects, for one Acquire, the owners that held the keys it
// waited for, as the backend saw them. Attach it to the Acquire's context
// with WithWaitTrace (the pattern of net/http/httptrace); backends report
// with TraceHolder. Safe for concurrent use.
type WaitTrace struct {
	mu      sync.Mutex
	holders []string
}

type traceKey struct{}

// WithWaitTrace returns ctx carrying t.
func WithWaitTrace(ctx context.Context, t *WaitTrace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

// TraceHolder tells the WaitTrace of ctx, if any, that holder (an owner
// id, see Owner.ID) held a key the Acquire waited for. Cheap when ctx
// carries no trace.
func TraceHolder(ctx context.Context, holder string) {
	if holder == "" {
		return
	}
	t, _ := ctx.Value(traceKey{}).(*WaitTrace)
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !slices.Contains(t.holders, holder) {
		t.holders = append(t.holders, holder)
	}
}

// Holders lists the holders reported so far, in the order first seen.
func (t *WaitTrace) Holders() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.holders)
}
