package redislock

import (
	"context"
	_ "embed"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/lockmgr/internal/grantscript"
)

var (
	//go:embed release.lua
	releaseSrc string
	//go:embed release_many.lua
	releaseManySrc string
	//go:embed renew.lua
	renewSrc string
	//go:embed renew_many.lua
	renewManySrc string
	//go:embed keep.lua
	keepSrc string
)

// scripts are the Lua scripts of one Locker. release gives back one
// key, releaseMany several of one token (release_many.lua); renew and
// renewMany likewise.
type scripts struct {
	acquire, release, releaseMany, renew, renewMany, observe, keep *redis.Script
}

func newScripts() scripts {
	return scripts{
		acquire:     redis.NewScript(grantscript.Source),
		release:     redis.NewScript(grantscript.FastForm + releaseSrc + "return release(KEYS, ARGV)\n"),
		releaseMany: redis.NewScript(grantscript.FastForm + releaseSrc + releaseManySrc),
		renew:       redis.NewScript(renewSrc + "return renew(KEYS, ARGV)\n"),
		renewMany:   redis.NewScript(renewSrc + renewManySrc),
		observe:     redis.NewScript(grantscript.ObserveSource),
		keep:        redis.NewScript(keepSrc),
	}
}

// load puts every script in the server's cache (all masters of a cluster)
// so the first EVALSHA does not miss.
func (s scripts) load(ctx context.Context, rdb redis.UniversalClient) error {
	var errs []error
	for _, sc := range []*redis.Script{s.acquire, s.release, s.releaseMany, s.renew, s.renewMany, s.observe, s.keep} {
		errs = append(errs, sc.Load(ctx, rdb).Err())
	}
	return errors.Join(errs...)
}

// pipelined runs the calls queued by queue (EVALSHA) in one round trip
// (per cluster node). If the server lost its script cache (restart), it
// loads the scripts and runs them once more. The caller reads each Cmd.
func (s scripts) pipelined(ctx context.Context, rdb redis.UniversalClient, queue func(p redis.Pipeliner) []*redis.Cmd) ([]*redis.Cmd, error) {
	for attempt := 0; ; attempt++ {
		var cmds []*redis.Cmd
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			cmds = queue(p)
			return nil
		})
		if attempt == 0 && err != nil && noScript(cmds) {
			if lerr := s.load(ctx, rdb); lerr != nil {
				return cmds, lerr
			}
			continue
		}
		if err != nil && errors.Is(err, redis.Nil) {
			err = nil
		}
		return cmds, err
	}
}

func noScript(cmds []*redis.Cmd) bool {
	for _, c := range cmds {
		if c.Err() != nil && strings.HasPrefix(c.Err().Error(), "NOSCRIPT") {
			return true
		}
	}
	return false
}
