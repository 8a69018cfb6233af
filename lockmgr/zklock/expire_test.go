package zklock_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
	"github.com/lockproxy/lockproxy/lockmgr/locktest"
)

// TestSessionExpired: the holder's Locker is cut off from ZooKeeper (a
// network partition) until the server expires its session. The holder's
// lease ends with ErrLeaseLost, a waiter on another Locker gets the key
// only once the holder's lease is no longer valid (never two valid holders)
// and with a larger fence, and once the network is back the holder's Locker
// grants again on a new session.
func TestSessionExpired(t *testing.T) {
	s := getServer(t)
	r := root()
	p := newProxy(t, s.addr)
	holder := newLocker(t, p.addr(), r, testTTL)
	defer holder.Close()
	waiter := newLocker(t, s.addr, r, testTTL)
	defer waiter.Close()
	k := lockmgr.Key{Name: "expired", Rule: "r"}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	a := locktest.LoseHolder(t, ctx, holder, waiter, k, 5*testTTL, func() {
		for len(waiter.Snapshot()) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		p.cut()
	}, "it was cut off from ZooKeeper")
	p.restore(t)
	var again *lockmgr.Lease
	var err error
	for again == nil {
		again, err = holder.Acquire(ctx, locktest.Owner("c"), []lockmgr.Key{k})
		if err != nil && (!errors.Is(err, lockmgr.ErrUnavailable) && !errors.Is(err, lockmgr.ErrLeaseLost) || ctx.Err() != nil) {
			t.Fatalf("Acquire after the session expired: %v", err)
		}
	}
	if !again.Valid() {
		t.Errorf("lease on the new session is not valid")
	}
	if err := again.Release(ctx); err != nil {
		t.Error(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Errorf("release of a lost lease: %v", err)
	}
}

// proxy forwards TCP connections to target until cut.
type proxy struct {
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	cuts   int // how many cuts so far
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	go p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve(ln net.Listener) {
	// A cut after this closes ln: a connection it accepted before the
	// cut is relayed only if the cut has not come by the time it is
	// registered.
	p.mu.Lock()
	cuts := p.cuts
	p.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cuts != cuts {
			// Cut while the target was dialled: relayed past the cut,
			// it would keep the session alive through the outage.
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}

// cut closes the listener and every connection: nothing gets through.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	p.cuts++
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore listens again on the same address.
func (p *proxy) restore(t *testing.T) {
	ln, err := net.Listen("tcp", p.addr())
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go p.serve(ln)
}
