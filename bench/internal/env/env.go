package env

import (
	"context"
	"log"
)

// Env is what every scenario runs in: the checkout, the bed, the lockproxy
// binary and a scratch directory. It is read-only once built and safe for
// concurrent use; the processes it starts are the caller's to stop.
type Env struct {
	Root   string // the lockproxy checkout (where go.mod is)
	Bed    *Bed
	Binary string // lockproxy binary
	// RelayBinary is bench/cmd/relay, the bare Go relay (StartRelay).
	RelayBinary string
	WorkDir     string // scratch space for configs and logs
	Log         *log.Logger
}

// StartProxy starts one lockproxy instance for cfg; see the package function.
func (e *Env) StartProxy(ctx context.Context, cfg ProxyConfig) (*Proxy, error) {
	return StartProxy(ctx, e.Binary, e.WorkDir, e.Bed, cfg)
}

// StartProxies starts n instances of cfg; on error the ones already started
// are stopped.
func (e *Env) StartProxies(ctx context.Context, n int, cfg ProxyConfig) ([]*Proxy, error) {
	var ps []*Proxy
	for range n {
		p, err := e.StartProxy(ctx, cfg)
		if err != nil {
			StopAll(context.Background(), ps)
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// StopAll stops every instance, logging nothing and returning the first error.
func StopAll(ctx context.Context, ps []*Proxy) error {
	var first error
	for _, p := range ps {
		if err := p.Stop(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
