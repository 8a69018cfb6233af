//go:build !linux

package rawsock

import "net"

// New returns c: the raw socket I/O of rawsock_linux.go is Linux only.
func New(c net.Conn) net.Conn { return c }

// Raw reports whether c is read and written raw: never off Linux.
func Raw(net.Conn) bool { return false }

// Readable reports whether c's socket holds data or has ended: off Linux
// it cannot tell, and says false.
func Readable(net.Conn) bool { return false }
