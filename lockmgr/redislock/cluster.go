package redislock

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// followCluster wires l into a Cluster client: a call that finds its node
// away reloads the slot map.
func (l *Locker) followCluster(cc *redis.ClusterClient) {
	cc.AddHook(slotMapRefresh{cc})
}

// slotMapRefresh asks a Cluster client to reload its slot map (in the
// background, at most every 200 ms) when a call fails because its node is
// away or the cluster is changing. go-redis reloads on MOVED and READONLY
// only, and otherwise once a minute; after a master dies it keeps sending
// that master's slots to the dead address until then, although a replica
// took over within seconds.
type slotMapRefresh struct{ cc *redis.ClusterClient }

var _ redis.Hook = slotMapRefresh{}

// DialHook is a pass-through.
func (r slotMapRefresh) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook reloads after a failed call.
func (r slotMapRefresh) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.after(err)
		return err
	}
}

// ProcessPipelineHook reloads after a pipeline with a failed call.
func (r slotMapRefresh) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil {
			for _, c := range cmds {
				if err = c.Err(); err != nil && !errors.Is(err, redis.Nil) {
					break
				}
			}
		}
		r.after(err)
		return err
	}
}

func (r slotMapRefresh) after(err error) {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return
	}
	if unavailable(err) {
		r.cc.ReloadState(context.Background())
	}
}
