package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/lockmgr/redislock"
	"github.com/lockproxy/lockproxy/rules"
)

// TestMinReplicasAckUnmet: on a Sentinel group of a master and two
// replicas, a lock service asked for three replicas' acknowledgement
// (locks.redis.min_replicas_ack) grants nothing it can keep: the guarded
// UPDATE waits its wait_timeout, is answered lockproxy's 1205 naming how
// many replicas acknowledged, and does not run.
func TestMinReplicasAckUnmet(t *testing.T) {
	g := testbed.StartSentinel(t)
	base := startProxy(t, nil)
	db := freshDB(t, base)
	direct := base.direct(t, db, "")
	testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)", "INSERT INTO sku VALUES (1, 100)")
	rdb := redis.NewUniversalClient(redislock.ClientOptions(g.Addrs, g.MasterName, false))
	t.Cleanup(func() { _ = rdb.Close() })
	locker := redislock.New(rdb, &redislock.Options{TTL: 3 * time.Second, Prefix: testbed.UniqueName(t), MinReplicasAck: 3})
	p := startProxyWith(t, func(c *rules.Config) {
		c.Rules = []rules.Rule{{Name: "sku-stock", Table: db + ".sku", Key: []string{"sku_id"},
			Lock: []string{rules.LockWrite}, OnUnkeyed: rules.OnUnkeyedReject, WaitTimeout: rules.Duration(time.Second)}}
	}, locker)
	h := p.db(t, db, "")
	_, err := h.Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 1")
	me := mysqlErr(t, err)
	t.Logf("answered %d %s", me.Number, me.Message)
	if me.Number != 1205 || !strings.HasPrefix(me.Message, "lockproxy:") || !strings.Contains(me.Message, "2 of 3 replicas") {
		t.Errorf("UPDATE with 3 replicas to acknowledge, of 2: %v, want lockproxy's 1205 naming 2 of 3 replicas", err)
	}
	var stock int
	if err := direct.QueryRow("SELECT stock FROM sku WHERE sku_id = 1").Scan(&stock); err != nil {
		t.Fatal(err)
	}
	if stock != 100 {
		t.Errorf("stock %d, want 100: the UPDATE ran on a grant not acknowledged", stock)
	}
}
