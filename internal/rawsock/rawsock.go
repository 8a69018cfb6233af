// Package rawsock reads and writes TCP and Unix sockets with raw read(2)
// and write(2) on Go's poller, for the connections lockproxy spends its
// life on: its clients', its backends' and its lock service's.
package rawsock

import (
	"context"
	"crypto/tls"
	"net"
	"time"
)

// KeepAlive is the TCP keep-alive of the lock service's connections made
// through DialFunc: go-redis's default for its own dialer.
var KeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}

// DialFunc returns a dial function for a client library that takes one
// (go-redis's Options.Dialer, the MySQL driver's Config.DialFunc): d's
// connections, read and written through New, or, when tlsConfig is not
// nil and returns a configuration as it dials, made as tls.DialWithDialer
// makes them (TLS reads and writes its socket itself).
func DialFunc(d *net.Dialer, tlsConfig func() *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if tlsConfig != nil {
			if tc := tlsConfig(); tc != nil {
				return tls.DialWithDialer(d, network, addr, tc)
			}
		}
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return New(c), nil
	}
}
