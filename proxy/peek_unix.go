//go:build unix

package proxy

import "syscall"

// peek reports what waits on the backend socket, without reading it and
// without blocking. Safe to call from any goroutine: it reads nothing the
// session's reader could miss.
func (b *backendConn) peek() peekState {
	if b.raw == nil {
		return peekNothing
	}
	state := peekNothing
	var buf [1]byte
	err := b.raw.Control(func(fd uintptr) {
		n, rerr := peekRecv(fd, buf[:])
		switch {
		case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		case rerr != nil:
			state = peekReset // reset (MariaDB ending a session at wait_timeout) or another socket error
		case n == 0:
			state = peekClosed
		default:
			state = peekData
		}
	})
	if err != nil {
		return peekNothing
	}
	return state
}
