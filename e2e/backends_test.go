package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockproxy/lockproxy/internal/testbed"
)

// lockTimes are the ttl and wait_timeout of every flash-sale backend, the
// same as TestFlashSaleTwoProxies uses for redis and mysql.
const lockTimes = "  ttl: 10s\n  wait_timeout: 10s\n"

// etcdLocks is a locks section on one etcd endpoint.
func etcdLocks(endpoint string) string {
	return fmt.Sprintf("locks:\n  backend: etcd\n  etcd:\n    endpoints: [%s]\n", endpoint) + lockTimes
}

// zkLocks is a locks section on one ZooKeeper server.
func zkLocks(server string) string {
	return fmt.Sprintf("locks:\n  backend: zookeeper\n  zookeeper:\n    servers: [%s]\n", server) + lockTimes
}

// redlockLocks is a locks section on independent redis-servers in redlock
// mode.
func redlockLocks(addrs []string) string {
	return fmt.Sprintf("locks:\n  backend: redis\n  redis:\n    mode: redlock\n    addrs: [%s]\n",
		strings.Join(addrs, ", ")) + lockTimes
}

// TestFlashSaleOtherBackends runs the two-proxy flash sale of
// TestFlashSaleTwoProxies on the lock backends that need servers of their
// own: one etcd, one ZooKeeper, and three independent redis-servers in
// redlock mode, each started for its subtest and stopped after it.
func TestFlashSaleOtherBackends(t *testing.T) {
	bed := testbed.Get(t)
	for _, backend := range []struct {
		name  string
		locks func(t *testing.T) string
	}{
		{"etcd", func(t *testing.T) string { return etcdLocks(startEtcd(t)) }},
		{"zookeeper", func(t *testing.T) string { return zkLocks(startZooKeeper(t)) }},
		{"redlock", func(t *testing.T) string { return redlockLocks(startRedises(t, 3)) }},
	} {
		// 150 buyers for 100 items: the queue-reading backends (etcd,
		// ZooKeeper) slow down with the length of a key's wait queue, and
		// this keeps the test's time bounded; the 400-buyer sale runs on
		// redis and mysql.
		t.Run(backend.name, func(t *testing.T) { flashSale(t, bed, backend.locks(t), 150) })
	}
}
