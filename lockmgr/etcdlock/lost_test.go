package etcdlock_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// TestRevokedSession: an operator revokes the holder's session lease. The
// holder's lease ends with ErrLeaseLost, a waiter on another Locker gets the
// key only once the holder's lease is no longer valid (never two valid
// holders) and with a larger fence, and the holder's Locker grants again on
// a new session.
func TestRevokedSession(t *testing.T) {
	s := getServer(t)
	pfx := prefix()
	ls := newLockers(t, s, pfx, testTTL, 2)
	defer ls[0].Close()
	defer ls[1].Close()
	k := lockmgr.Key{Name: "revoked/" + pfx, Rule: "r"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := locktest.LoseHolder(t, ctx, ls[0], ls[1], k, 5*testTTL,
		func() { revokeHolder(t, s.newClient(t), pfx, k.Name) }, "its session was revoked")
	if err := a.Release(ctx); err != nil {
		t.Errorf("release of a lost lease: %v", err)
	}
	again, err := ls[0].Acquire(ctx, locktest.Owner("c"), []lockmgr.Key{k})
	if err != nil {
		t.Fatalf("Acquire after the session was lost: %v", err)
	}
	if !again.Valid() {
		t.Errorf("lease on the new session is not valid")
	}
	_ = again.Release(ctx)
}

// revokeHolder revokes the lease of the first entry of key name, once a
// second entry (the waiter) is queued behind it.
func revokeHolder(t *testing.T, cli *clientv3.Client, pfx, name string) {
	t.Helper()
	dir := pfx + "/lock/" + url.PathEscape(name) + "/"
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		if err == nil && len(resp.Kvs) >= 2 {
			_, err = cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the waiter never queued")
}
