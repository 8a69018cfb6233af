package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/redis/go-redis/v9"
)

// The Redis failover scenarios: three lockproxy instances share a Redis
// Sentinel group or a Redis Cluster (testbed.StartSentinel/StartCluster) as
// their lock service while the flash sale of the fault harness runs through
// all three on a fenced stock row; then the master holding the hot key is
// killed, or the key's slot moves to another master. Short run in `make
// test`, long (16 buyers per instance, three rounds, each on a new group) in
// `make test-faults`; figures in docs/faults.md.

// lockGroup is a kind of lock service the scenarios run on.
type lockGroup struct {
	name   string
	start  func(testing.TB) *testbed.RedisGroup
	faults []groupFault
}

// groupFault breaks the group under the sale and returns when it began.
type groupFault struct {
	name   string
	inject func(t *testing.T, r *rig, g *testbed.RedisGroup) time.Time
}

func TestFaultRedisFailover(t *testing.T) {
	bed := testbed.Get(t)
	plan := currentPlan()
	groups := []lockGroup{
		{"sentinel", testbed.StartSentinel, []groupFault{{"master-killed", killHotMaster}}},
		{"cluster", testbed.StartCluster, []groupFault{{"slot-migrated", migrateHotSlot}, {"master-killed", killHotMaster}}},
	}
	var reports []string
	for _, lg := range groups {
		for round := range plan.rounds {
			t.Run(fmt.Sprintf("%s/%d", lg.name, round), func(t *testing.T) {
				g := lg.start(t)
				r := groupRig(t, bed, g, plan, 3, plan.buyersPerProxy+2, "")
				for _, f := range lg.faults {
					t.Run(f.name, func(t *testing.T) {
						rep := r.failoverDuringSale(t, g, f)
						reports = append(reports, lg.name+"/"+rep)
						t.Log(rep)
					})
				}
			})
		}
	}
	for _, rep := range reports {
		t.Log(rep)
	}
}

// groupYAML is locks.redis for the group.
func groupYAML(g *testbed.RedisGroup) string {
	y := "    addrs: [" + strings.Join(g.Addrs, ", ") + "]\n"
	if g.MasterName != "" {
		return y + "    master_name: " + g.MasterName
	}
	return y + "    cluster: true"
}

// groupRig starts instances on the group (each with a pool of conns
// connections; extra: more lines of locks.redis), with the fenced sale
// tables in a fresh database on the bed.
func groupRig(t *testing.T, bed *testbed.Bed, g *testbed.RedisGroup, plan faultPlan, instances, conns int, extra string) *rig {
	r := &rig{bed: bed, plan: plan}
	r.direct = freshDB(t, bed, faultDB)
	fencedSaleTables(t, r.direct)
	if err := bed.WaitReplicaCaughtUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range instances {
		r.nodes = append(r.nodes, startNode(t, bed, conns, groupYAML(g)+extra))
	}
	r.redis = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: g.Addrs, MasterName: g.MasterName,
		IsClusterMode: g.MasterName == "", DialTimeout: time.Second, MaxRetries: 2})
	t.Cleanup(func() { _ = r.redis.Close() })
	return r
}

// failoverDuringSale runs the sale, injects f, and checks what
// injectDuringSale checks. Recovery runs from the fault's start to the
// end of the first buy that began after it.
func (r *rig) failoverDuringSale(t *testing.T, g *testbed.RedisGroup, f groupFault) string {
	for _, s := range []string{"DELETE FROM orders", fmt.Sprintf(
		"INSERT INTO sku_stock (sku_id, stock) VALUES (1, %d) ON DUPLICATE KEY UPDATE stock = VALUES(stock)", saleStock)} {
		if _, err := r.direct.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	mustBed(t, r.bed.WaitReplicaCaughtUp(t.Context()))
	var ins []*instance
	for _, n := range r.nodes {
		ins = append(ins, n.instance)
	}
	lostBefore := metricSum(t, "lockproxy_lock_lease_lost_total", nil, ins...)
	w := r.startWorkload(t)
	begin := time.Now()
	time.Sleep(r.plan.before)
	faultAt := f.inject(t, r, g)
	var first time.Time
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if at, ok := w.firstBuyBegunSince(faultAt); ok {
			first = at
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no buy begun after the fault succeeded within 2m")
		}
	}
	time.Sleep(r.plan.after)
	w.stop()
	end := time.Now()

	rep := faultReport{name: f.name, recovery: first.Sub(faultAt), served: -1}
	events := w.snapshot()
	rep.buysBefore, _, _ = tally(events, begin, faultAt)
	rep.buysDuring, _, _ = tally(events, faultAt, first)
	rep.buysAfter, _, _ = tally(events, first, end.Add(time.Second))
	_, rep.reads, rep.samples = tally(events, begin, end.Add(time.Second))
	ff := fault{name: f.name}
	r.checkSale(t, ff, &rep)
	r.checkCodes(t, ff, events)
	lost := metricSum(t, "lockproxy_lock_lease_lost_total", nil, ins...) - lostBefore
	rep.locksClear = r.checkLocksClear(t)
	r.checkServing(t)
	r.checkSellOut(t)
	return fmt.Sprintf("%sleases lost %v (all instances)", rep, lost)
}

// hotKey is the lock hash of the sale's row, found by its fence counter,
// which outlives each grant.
func hotKey(t *testing.T, r *rig) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		keys, err := lockKeys(t.Context(), r.redis, "lockproxy:{*}:fence")
		if err != nil {
			continue
		}
		for _, k := range keys {
			if base, ok := strings.CutSuffix(k, ":fence"); ok {
				return base
			}
		}
	}
	t.Fatal("the hot key's fence counter is in no master")
	return ""
}

// masterOf returns the client and address of the master holding key.
func masterOf(t *testing.T, r *rig, g *testbed.RedisGroup, key string) (*redis.Client, string) {
	t.Helper()
	ctx := t.Context()
	if cc, ok := r.redis.(*redis.ClusterClient); ok {
		c, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return c, c.Options().Addr
	}
	s := redis.NewSentinelClient(&redis.Options{Addr: g.Addrs[0]})
	defer s.Close()
	hp, err := s.GetMasterAddrByName(ctx, g.MasterName).Result()
	if err != nil {
		t.Fatal(err)
	}
	return nil, net.JoinHostPort(hp[0], hp[1])
}

// killHotMaster SIGKILLs the master that holds the sale's key; Sentinel or
// the Cluster promotes one of its replicas.
func killHotMaster(t *testing.T, r *rig, g *testbed.RedisGroup) time.Time {
	key := hotKey(t, r)
	_, addr := masterOf(t, r, g, key)
	mustBed(t, g.KillNode(t.Context(), addr))
	gone := time.Now() // KillNode returns once the process is gone
	t.Logf("killed master %s of %s", addr, key)
	return gone
}

// migrateHotSlot moves the slot of the sale's key to another master while
// the sale runs, as redis-cli --cluster reshard does: IMPORTING on the
// target, MIGRATING on the source, MIGRATE the keys, then SETSLOT NODE
// everywhere.
func migrateHotSlot(t *testing.T, r *rig, g *testbed.RedisGroup) time.Time {
	ctx := t.Context()
	key := hotKey(t, r)
	cc := r.redis.(*redis.ClusterClient)
	slot, err := cc.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	src, srcAddr := masterOf(t, r, g, key)
	var mu sync.Mutex
	var masters []*redis.Client
	var dst *redis.Client
	mustBed(t, cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters = append(masters, c)
		if c.Options().Addr != srcAddr && (dst == nil || c.Options().Addr < dst.Options().Addr) {
			dst = c
		}
		return nil
	}))
	if dst == nil {
		t.Fatal("no other master to move the slot to")
	}
	srcID := src.Do(ctx, "CLUSTER", "MYID").Val()
	dstID := dst.Do(ctx, "CLUSTER", "MYID").Val()
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	began := time.Now()
	mustBed(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	mustBed(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	moved := 0
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		mustBed(t, err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		mustBed(t, src.Do(ctx, args...).Err())
		moved += len(keys)
	}
	mustBed(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	mustBed(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	for _, m := range masters {
		if m != src && m != dst {
			mustBed(t, m.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
		}
	}
	t.Logf("slot %d of %s moved from %s to %s (%d keys) in %v", slot, key, srcAddr, dst.Options().Addr,
		moved, time.Since(began).Round(time.Millisecond))
	return began
}
