//go:build unix && !(linux && (amd64 || arm64))

package proxy

import "syscall"

// peekRecv is recvfrom(fd, buf, MSG_PEEK|MSG_DONTWAIT).
func peekRecv(fd uintptr, buf []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}
