package redislock

import (
	"net"

	"github.com/lockproxy/lockproxy/internal/rawsock"
)

// isRawsock: c is read and written through rawsock.
func isRawsock(c net.Conn) bool {
	_, ok := c.(*rawsock.Conn)
	return ok
}
