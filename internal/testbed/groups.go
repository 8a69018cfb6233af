package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// RedisGroup is a Redis Sentinel group or a Redis Cluster that
// scripts/testbed.sh started for one test, on private loopback ports. Its
// nodes detect a failure in 2 s (down-after-milliseconds,
// cluster-node-timeout) and keep nothing on disk. Its fields never change.
type RedisGroup struct {
	// Dir is the directory the group lives in (one subdirectory per node).
	Dir string
	// Addrs are the sentinels of a Sentinel group, or every node (masters
	// and replicas) of a Cluster: what locks.redis.addrs lists.
	Addrs []string
	// MasterName is the master name the sentinels watch; "" for a Cluster.
	MasterName string
}

// StartSentinel starts a Redis Sentinel group for t alone: a master, two
// replicas and three sentinels watching it, stopped and removed when t
// ends. It fails or skips like Get when it cannot be started.
func StartSentinel(t testing.TB) *RedisGroup { return startGroup(t, "sentinel") }

// StartCluster starts a Redis Cluster for t alone: three masters, each with
// a replica, stopped and removed when t ends. It fails or skips like Get
// when it cannot be started.
func StartCluster(t testing.TB) *RedisGroup { return startGroup(t, "cluster") }

func startGroup(t testing.TB, kind string) *RedisGroup {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout+startTimeout)
	defer cancel()
	g, err := launchGroup(ctx, kind)
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := runScript(ctx, nil, "down", g.Dir); err != nil {
			t.Error(err)
		}
		_ = os.RemoveAll(g.Dir)
	})
	return g
}

func launchGroup(ctx context.Context, kind string) (*RedisGroup, error) {
	if err := ensureInstalled(ctx); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	dir, err := os.MkdirTemp("", "lp"+kind[:3]+"-")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	upCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	_, err = runScript(upCtx, []string{
		"LOCKPROXY_TESTBED_OWNER_PID=" + strconv.Itoa(os.Getpid()),
		"LOCKPROXY_TESTBED_EPHEMERAL=1",
	}, kind, dir)
	var g *RedisGroup
	if err == nil {
		g, err = loadGroup(dir, kind)
	}
	if err != nil {
		down, stop := context.WithTimeout(context.Background(), time.Minute)
		defer stop()
		_, _ = runScript(down, nil, "down", dir)
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return g, nil
}

// loadGroup reads DIR/KIND/env, which `scripts/testbed.sh KIND DIR` writes.
func loadGroup(dir, kind string) (*RedisGroup, error) {
	f, err := os.Open(filepath.Join(dir, kind, "env"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env, err := parseEnv(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	g := &RedisGroup{Dir: dir}
	addrs := env["LOCKPROXY_CLUSTER_ADDRS"]
	if kind == "sentinel" {
		addrs, g.MasterName = env["LOCKPROXY_SENTINEL_ADDRS"], env["LOCKPROXY_SENTINEL_MASTER"]
	}
	if addrs == "" {
		return nil, fmt.Errorf("%s: %w: no addresses", f.Name(), errEnv)
	}
	g.Addrs = strings.Split(addrs, ",")
	return g, nil
}

// KillNode sends SIGKILL to the group's node on addr (a master, a replica
// or a sentinel) and waits until the process is gone.
func (g *RedisGroup) KillNode(ctx context.Context, addr string) error {
	ctx, cancel := bounded(ctx, time.Minute)
	defer cancel()
	_, err := runScript(ctx, nil, "kill-node", g.Dir, addr)
	return err
}
