//go:build unix

package proxy

import "syscall"

// peekReadable reports whether the backend socket has data or an end of
// stream waiting, without reading it and without blocking. Safe to call
// from any goroutine: it reads nothing the session's reader could miss.
func (b *backendConn) peekReadable() bool {
	if b.raw == nil {
		return false
	}
	var readable bool
	var buf [1]byte
	err := b.raw.Control(func(fd uintptr) {
		n, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		case rerr != nil:
			readable = true // reset or another socket error: the connection is over
		default:
			readable = n >= 0 // data, or 0: the server closed its side
		}
	})
	return err == nil && readable
}
