package redislock

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockproxy/lockproxy/internal/rawsock"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestClientConnections: ClientOptions's connections are read and written
// through rawsock, and go-redis's pool still checks one before it hands it
// out: a connection the server closed while it sat idle is replaced, so a
// command with no retries left succeeds instead of failing on the dead
// socket.
func TestClientConnections(t *testing.T) {
	bed := testbed.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := ClientOptions([]string{bed.RedisAddr}, "", false)
	c, err := o.Dialer(ctx, "tcp", bed.RedisAddr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if runtime.GOOS == "linux" && !rawsock.Raw(c) {
		t.Fatalf("a plain connection to Redis is a %T, not read through rawsock", c)
	}

	o.MaxRetries, o.PoolSize = -1, 1
	var last func() net.Conn // the pool's one connection
	o.Dialer, last = testbed.RecordDials(o.Dialer)
	rdb := redis.NewUniversalClient(o)
	defer rdb.Close()
	admin := redis.NewClient(&redis.Options{Addr: bed.RedisAddr})
	defer admin.Close()
	for round := range 3 {
		id, err := rdb.ClientID(ctx).Result()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := admin.ClientKillByFilter(ctx, "ID", strconv.FormatInt(id, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		testbed.Eventually(t, 10*time.Second, "the server's close reaches the idle socket", func() bool {
			return rawsock.Readable(last())
		})
		got, err := rdb.ClientID(ctx).Result()
		if err != nil {
			t.Fatalf("round %d: the command after the server closed the idle connection: %v", round, err)
		}
		if got == id {
			t.Fatalf("round %d: the killed connection %d answered", round, id)
		}
	}
}
