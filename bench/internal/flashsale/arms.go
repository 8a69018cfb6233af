package flashsale

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/lockproxy/lockproxy/bench/internal/contend"
	"github.com/lockproxy/lockproxy/bench/internal/env"
	"github.com/redis/go-redis/v9"
)

// lockTxnName and rewriteName name the arms through lockproxy, for n
// instances.
func lockTxnName(prepared bool, n int) string {
	return fmt.Sprintf("lock rule: unsafe txn, %s, ×%d", proto(prepared), n)
}

func rewriteName(prepared bool, n int) string {
	return fmt.Sprintf("rewrite rule: autocommit, %s, ×%d", proto(prepared), n)
}

func proto(prepared bool) string {
	if prepared {
		return "prepared"
	}
	return "text"
}

func forUpdate(prepared bool) string {
	if prepared {
		return ForUpdatePrepared
	}
	return ForUpdateText
}

func addrs(ps []*env.Proxy, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = ps[i].Addr
	}
	return out
}

// arms lists the direct baselines first, then lockproxy arms by instances.
func (k *kit) arms(pl plan, lockPx, rwPx []*env.Proxy, rdb *redis.Client) []contend.Arm {
	direct := []string{k.e.Bed.Primary}
	txn := func(st contend.TxnStyle) func(contend.Pools) contend.Op {
		st.Order = true
		return func(p contend.Pools) contend.Op { return contend.TxnReadWrite(p, contend.HotKey, st) }
	}
	arm := func(name, base string, n int, a []string, mk func(contend.Pools) contend.Op) contend.Arm {
		return contend.Arm{Name: name, Baseline: base, Instances: n, Run: func(ctx context.Context, _ int) (contend.Sample, error) {
			return k.sale(ctx, a, mk)
		}}
	}
	var seq int
	out := []contend.Arm{
		arm(ForUpdateText, "", 0, direct, txn(contend.TxnStyle{ForUpdate: true})),
		arm(ForUpdatePrepared, "", 0, direct, txn(contend.TxnStyle{ForUpdate: true, Prepared: true})),
		arm(UnsafeText, ForUpdateText, 0, direct, txn(contend.TxnStyle{})),
		arm(UnsafePrepared, ForUpdatePrepared, 0, direct, txn(contend.TxnStyle{Prepared: true})),
		arm(AppLock, ForUpdateText, 0, direct, func(p contend.Pools) contend.Op {
			seq++
			prefix := "bench:flashsale:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" + strconv.Itoa(seq) + ":"
			return contend.AppLocked(rdb, prefix, contend.HotKey, contend.TxnReadWrite(p, contend.HotKey, contend.TxnStyle{Order: true}))
		}),
	}
	for _, n := range pl.instances {
		for _, prepared := range []bool{false, true} {
			out = append(out, arm(lockTxnName(prepared, n), forUpdate(prepared), n, addrs(lockPx, n), txn(contend.TxnStyle{Prepared: prepared})))
		}
		for _, prepared := range []bool{false, true} {
			out = append(out, arm(rewriteName(prepared, n), forUpdate(prepared), n, addrs(rwPx, n), func(p contend.Pools) contend.Op {
				return contend.AutocommitReadWrite(p, contend.HotKey, prepared, true)
			}))
		}
	}
	return out
}
