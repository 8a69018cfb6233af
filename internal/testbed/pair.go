package testbed

import (
	"context"
	"net"
	"sync"
	"testing"
)

// TCPPair returns both ends of a loopback TCP connection, closed when
// the test ends.
func TCPPair(t testing.TB) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		done <- c
	}()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return a, b
}

// RecordDials wraps dial so that last returns the connection it made
// most recently (nil before the first): a test can then watch the socket
// a client library's pool holds.
func RecordDials(dial func(ctx context.Context, network, addr string) (net.Conn, error)) (
	wrapped func(ctx context.Context, network, addr string) (net.Conn, error), last func() net.Conn) {
	var mu sync.Mutex
	var c net.Conn
	wrapped = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err == nil {
			mu.Lock()
			c = nc
			mu.Unlock()
		}
		return nc, err
	}
	last = func() net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return c
	}
	return wrapped, last
}
