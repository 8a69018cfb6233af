//go:build !linux

package redislock

import "net"

// isRawsock: rawsock leaves connections as they are off Linux.
func isRawsock(net.Conn) bool { return true }
